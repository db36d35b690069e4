#!/usr/bin/env bash
# Test harness for real Apache Kafka brokers (KRaft, one combined broker+controller node per
# cluster, plus broker-only nodes where a test joins them; loopback only). Jars come from Maven
# Central; nothing else is downloaded.
#
#   scripts/kafka.sh fetch                          download jars, build the tests/java tools
#                                                   (Workload, Mm2Client); print the cache dir
#   scripts/kafka.sh classpath                      print the classpath (after fetch)
#   scripts/kafka.sh start NAME PORT DATA_DIR [k=v ...]
#                                                   format + start a broker on PORT (controller
#                                                   on PORT+1), wait until ready, print bootstrap
#   scripts/kafka.sh join NAME PORT DATA_DIR NODE_DIR NODE_ID [k=v ...]
#                                                   start a broker-only node NODE_ID (>= 2) on
#                                                   PORT in the cluster whose combined node runs
#                                                   from NODE_DIR (same cluster id, its
#                                                   controller as the quorum), print bootstrap
#   scripts/kafka.sh stop DATA_DIR                  SIGTERM (then SIGKILL after 20 s)
#   scripts/kafka.sh tool CLASS ARGS...             run a Kafka / tests/java main class
#
# The jars include connect-mirror and its Connect runtime: scripts/mm2.sh runs MirrorMaker 2.
#
# Environment:
#   STRAIT_CACHE                cache root (default $HOME/.cache/strait)
#   STRAIT_KAFKA_WATCH_PID      `start`: kill the broker once this process is gone
#   STRAIT_KAFKA_WATCH_CLEAN=1  ... and then remove DATA_DIR (and its parent if left empty)
#   STRAIT_KAFKA_JAVA_OPTS      extra JVM options for brokers (e.g. -XX:TieredStopAtLevel=4)
#   STRAIT_KAFKA_CDS=0          do not use class-data sharing archives
set -euo pipefail

KAFKA_VERSION=4.1.1
LOG4J_VERSION=2.24.3 # the log4j2 version kafka-server 4.1.1 depends on
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
JAVA_DIR="$HERE/../tests/java"
CACHE="${STRAIT_CACHE:-$HOME/.cache/strait}/kafka-$KAFKA_VERSION"
TOOLS_JAR="$CACHE/tools-classes/workload.jar"
BROKER_CP="$CACHE/libs/*"
CP="$CACHE/libs/*:$TOOLS_JAR"
START_TIMEOUT_S=90
BROKER_JAVA_OPTS=(-Xms128m -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto
    -Djava.awt.headless=true)
# JVM warnings go to stderr so that tool stdout stays parseable.
TOOL_JAVA_OPTS=(-Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto
    -Djava.awt.headless=true -Xlog:disable -Xlog:all=warning:stderr
    "-Dlog4j2.configurationFile=$CACHE/log4j2-tool.properties")

die() { echo "kafka.sh: $*" >&2; exit 1; }

# A pid is alive if it exists and is not a zombie (pid 1 in a container may never reap).
alive() {
    local st
    st="$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" || return 1
    [[ -n "$st" && "$st" != Z ]]
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# --- fetch -------------------------------------------------------------------------------------

fetch_jars() {
    local tmp deps="" a
    tmp="$(mktemp -d)"
    for a in kafka_2.13 kafka-tools connect-mirror connect-mirror-client kafka-clients; do
        deps+="<dependency><groupId>org.apache.kafka</groupId><artifactId>$a</artifactId>"
        deps+="<version>$KAFKA_VERSION</version></dependency>"
    done
    # Kafka 4.x logs through slf4j 1.7 -> log4j2; that binding is not a transitive dependency.
    deps+="<dependency><groupId>org.apache.logging.log4j</groupId>"
    deps+="<artifactId>log4j-slf4j-impl</artifactId><version>$LOG4J_VERSION</version></dependency>"
    cat >"$tmp/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>strait</groupId><artifactId>kafka-harness</artifactId><version>1</version>
  <dependencies>$deps</dependencies>
</project>
EOF
    echo "kafka.sh: fetching Kafka $KAFKA_VERSION jars with Maven..." >&2
    if ! (cd "$tmp" && mvn -B -q -Dstyle.color=never dependency:copy-dependencies \
            -DincludeScope=runtime -DoutputDirectory="$tmp/libs" >&2); then
        rm -rf "$tmp"
        die "maven fetch failed"
    fi
    rm -rf "$CACHE/libs" "$CACHE/cds"
    mv "$tmp/libs" "$CACHE/libs"
    rm -rf "$tmp"
    touch "$CACHE/libs/.complete"
}

# Builds the Java tools (every tests/java/*.java) into one jar (class-data sharing ignores class
# directories), again whenever a source is newer or the set of sources changed; the tool CDS
# archive then no longer matches.
build_tools() {
    local srcs=("$JAVA_DIR"/*.java) names="" s stale=0
    [[ -f "${srcs[0]}" ]] || die "no Java sources in $JAVA_DIR"
    for s in "${srcs[@]}"; do
        names+="$(basename "$s") "
        if [[ "$s" -nt "$TOOLS_JAR" ]]; then stale=1; fi
    done
    [[ -f "$TOOLS_JAR" && "$(cat "$TOOLS_JAR.sources" 2>/dev/null)" == "$names" ]] || stale=1
    ((stale)) || return 0
    local classes="$CACHE/tools-classes.tmp"
    rm -rf "$classes"
    mkdir -p "$classes" "$(dirname "$TOOLS_JAR")"
    javac -nowarn -encoding UTF-8 --release 17 -cp "$BROKER_CP" -d "$classes" "${srcs[@]}" >&2 \
        || die "javac failed"
    jar --create --file "$TOOLS_JAR.tmp" -C "$classes" .
    mv "$TOOLS_JAR.tmp" "$TOOLS_JAR"
    echo "$names" >"$TOOLS_JAR.sources"
    rm -rf "$classes" "$CACHE/cds/tool.jsa"
}

fetch() {
    mkdir -p "$CACHE"
    # Several test binaries may fetch at once: serialise on a lock file.
    exec 9>"$CACHE/.lock"
    flock 9
    [[ -f "$CACHE/libs/.complete" ]] || fetch_jars
    if [[ ! -f "$CACHE/log4j2-tool.properties" ]]; then
        # Quiet logging for tools: WARN and above to stderr.
        cat >"$CACHE/log4j2-tool.properties.tmp" <<'EOF'
status = error
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = STDERR
EOF
        mv "$CACHE/log4j2-tool.properties.tmp" "$CACHE/log4j2-tool.properties"
    fi
    build_tools
    cds_prepare
    flock -u 9
    exec 9>&-
}

# --- class-data sharing ------------------------------------------------------------------------
# AppCDS archives of the classes that a broker and the tools load cut JVM start-up by about a
# third, which adds up since every tool run is a JVM. One training run builds them; they are
# rebuilt when the JVM, the jars or the tools change.

cds_enabled() { [[ "${STRAIT_KAFKA_CDS:-1}" != 0 ]]; }

# Sets CDS_OPTS to the options that map archive $1 (broker|tool), if it exists.
cds_opts() {
    CDS_OPTS=()
    if cds_enabled && [[ -f "$CACHE/cds/$1.jsa" ]]; then
        CDS_OPTS=("-XX:SharedArchiveFile=$CACHE/cds/$1.jsa")
    fi
}

cds_prepare() {
    cds_enabled || return 0
    local java_bin key
    java_bin="$(readlink -f "$(command -v java)")"
    key="$java_bin $(stat -c %Y "$java_bin")"
    mkdir -p "$CACHE/cds"
    if [[ "$(cat "$CACHE/cds/key" 2>/dev/null)" != "$key" ]]; then
        rm -f "$CACHE/cds/"*.jsa "$CACHE/cds/failed"
        echo "$key" >"$CACHE/cds/key"
    fi
    [[ -f "$CACHE/cds/broker.jsa" && -f "$CACHE/cds/tool.jsa" ]] && return 0
    [[ -f "$CACHE/cds/failed" ]] && return 0
    echo "kafka.sh: building class-data sharing archives (once)..." >&2
    if ! (cds_train) >"$CACHE/cds/train.log" 2>&1; then
        touch "$CACHE/cds/failed"
        echo "kafka.sh: warning: CDS training failed (see $CACHE/cds/train.log)" >&2
    fi
}

# Runs in a subshell (where errexit is off): a broker and `Workload train` archive their
# classes at exit.
cds_train() {
    local port=$((20000 + RANDOM % 20000))
    while port_open "$port" || port_open $((port + 1)); do port=$((20000 + RANDOM % 20000)); done
    TRAIN_DIR="$(mktemp -d)"
    trap 'stop "$TRAIN_DIR" || true; rm -rf "$TRAIN_DIR"' EXIT
    local broker_out="" tool_out=""
    [[ -f "$CACHE/cds/broker.jsa" ]] || broker_out="$CACHE/cds/broker.jsa.tmp"
    [[ -f "$CACHE/cds/tool.jsa" ]] || tool_out="$CACHE/cds/tool.jsa.tmp"
    CDS_ARCHIVE_OUT="$broker_out" start_broker train "$port" "$TRAIN_DIR"
    if [[ -n "$tool_out" ]]; then
        java "${TOOL_JAVA_OPTS[@]}" "-XX:ArchiveClassesAtExit=$tool_out" -cp "$CP" \
            Workload train --bootstrap "127.0.0.1:$port" || return 1
        mv "$tool_out" "$CACHE/cds/tool.jsa"
    fi
    stop "$TRAIN_DIR"
    if [[ -n "$broker_out" ]]; then mv "$broker_out" "$CACHE/cds/broker.jsa"; fi
}

# --- start / stop ------------------------------------------------------------------------------

# Kafka's Uuid string form: url-safe base64 of 16 random bytes, no padding, not starting with '-'.
random_uuid() {
    local id
    while :; do
        id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
        if [[ "$id" != -* ]]; then echo "$id"; return; fi
    done
}

start() {
    [[ $# -ge 3 ]] || die "usage: start NAME PORT DATA_DIR [key=value ...]"
    fetch
    start_broker "$@"
}

join() {
    [[ $# -ge 5 ]] || die "usage: join NAME PORT DATA_DIR NODE_DIR NODE_ID [key=value ...]"
    local node_dir="$4" node_id="$5"
    [[ "$node_id" =~ ^[0-9]+$ && "$node_id" -ge 2 ]] || die "bad node id: $node_id"
    # The combined node's quorum and cluster id, as it wrote them.
    JOIN_VOTERS="$(sed -n 's/^controller.quorum.voters=//p' "$node_dir/server.properties")"
    JOIN_CLUSTER_ID="$(sed -n 's/^cluster.id=//p' "$node_dir/logs/meta.properties")"
    [[ -n "$JOIN_VOTERS" && -n "$JOIN_CLUSTER_ID" ]] || die "no cluster started from $node_dir"
    JOIN_NODE_ID="$node_id"
    fetch
    start_broker "$1" "$2" "$3" "${@:6}"
}

# start_broker NAME PORT DATA_DIR [key=value ...]; expects fetched jars. A combined
# broker+controller node 1 of a new cluster (controller on PORT+1), or with JOIN_NODE_ID,
# JOIN_VOTERS and JOIN_CLUSTER_ID set (`join`), a broker-only node of an existing one.
start_broker() {
    local name="$1" port="$2" dir="$3"
    shift 3
    [[ "$port" =~ ^[0-9]+$ ]] || die "bad port: $port"
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    local cport=$((port + 1)) node_id="${JOIN_NODE_ID:-1}"
    if [[ -f "$dir/broker.pid" ]] && alive "$(cat "$dir/broker.pid")"; then
        die "$name: broker already running (pid $(cat "$dir/broker.pid"))"
    fi
    port_open "$port" && die "$name: port $port is already in use"
    if [[ -z "${JOIN_NODE_ID:-}" ]]; then
        port_open "$cport" && die "$name: controller port $cport is already in use"
    fi

    {
        echo "# cluster $name"
        if [[ -n "${JOIN_NODE_ID:-}" ]]; then
            echo "process.roles=broker"
            echo "node.id=$node_id"
            echo "controller.quorum.voters=$JOIN_VOTERS"
            echo "listeners=PLAINTEXT://127.0.0.1:$port"
        else
            echo "process.roles=broker,controller"
            echo "node.id=1"
            echo "controller.quorum.voters=1@127.0.0.1:$cport"
            echo "listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport"
        fi
        echo "advertised.listeners=PLAINTEXT://127.0.0.1:$port"
        echo "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
        echo "controller.listener.names=CONTROLLER"
        echo "inter.broker.listener.name=PLAINTEXT"
        echo "log.dirs=$dir/logs"
        echo "num.partitions=1"
        echo "default.replication.factor=1"
        echo "min.insync.replicas=1"
        echo "offsets.topic.replication.factor=1"
        echo "offsets.topic.num.partitions=5"
        echo "transaction.state.log.replication.factor=1"
        echo "transaction.state.log.min.isr=1"
        echo "transaction.state.log.num.partitions=5"
        echo "share.coordinator.state.topic.replication.factor=1"
        echo "share.coordinator.state.topic.min.isr=1"
        echo "group.initial.rebalance.delay.ms=0"
        echo "auto.create.topics.enable=false"
        echo "log.cleaner.backoff.ms=500"
        echo "log.retention.check.interval.ms=1000"
        local kv
        for kv in "$@"; do
            [[ "$kv" == *=* ]] || die "extra broker setting must be key=value: $kv"
            echo "$kv"
        done
    } >"$dir/server.properties.tmp"
    # Later keys override earlier ones: keep only the last occurrence of each key.
    tac "$dir/server.properties.tmp" | awk -F= '/^#/ || !seen[$1]++' | tac >"$dir/server.properties"
    rm -f "$dir/server.properties.tmp"

    cat >"$dir/log4j2.properties" <<EOF
status = error
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = $dir/broker.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = FILE
# Readiness: KafkaRaftServer logs "Kafka Server started" at INFO once the broker is RUNNING.
logger.ready.name = kafka.server.KafkaRaftServer
logger.ready.level = INFO
EOF

    local opts=("${BROKER_JAVA_OPTS[@]}" "-Dlog4j2.configurationFile=$dir/log4j2.properties")
    cds_opts broker
    # Format once (static quorum: no --standalone / --initial-controllers needed). The format
    # writes meta.properties and a bootstrap.checkpoint of feature levels that is the same for
    # every cluster of this Kafka version: keep it and skip that JVM next time. A broker-only
    # node needs only meta.properties, with the cluster id of the node it joins.
    if [[ ! -f "$dir/logs/meta.properties" ]]; then
        if [[ -n "${JOIN_NODE_ID:-}" ]]; then
            mkdir -p "$dir/logs"
            printf 'node.id=%s\ndirectory.id=%s\nversion=1\ncluster.id=%s\n' \
                "$node_id" "$(random_uuid)" "$JOIN_CLUSTER_ID" >"$dir/logs/meta.properties"
        elif [[ -f "$CACHE/bootstrap.checkpoint" ]]; then
            mkdir -p "$dir/logs"
            cp "$CACHE/bootstrap.checkpoint" "$dir/logs/bootstrap.checkpoint"
            printf 'node.id=1\ndirectory.id=%s\nversion=1\ncluster.id=%s\n' \
                "$(random_uuid)" "$(random_uuid)" >"$dir/logs/meta.properties"
        else
            java "${opts[@]}" "${CDS_OPTS[@]}" -cp "$BROKER_CP" kafka.tools.StorageTool format \
                -t "$(random_uuid)" -c "$dir/server.properties" --ignore-formatted \
                >"$dir/format.out" 2>&1 </dev/null \
                || { cat "$dir/format.out" >&2; die "$name: storage format failed"; }
            cp "$dir/logs/bootstrap.checkpoint" "$CACHE/bootstrap.checkpoint.$$"
            mv "$CACHE/bootstrap.checkpoint.$$" "$CACHE/bootstrap.checkpoint"
        fi
    fi

    if [[ -n "${CDS_ARCHIVE_OUT:-}" ]]; then
        opts+=("-XX:ArchiveClassesAtExit=$CDS_ARCHIVE_OUT")
    else
        opts+=("${CDS_OPTS[@]}")
    fi
    # shellcheck disable=SC2206 # word splitting of user JVM options is intended
    opts+=(${STRAIT_KAFKA_JAVA_OPTS:-})
    : >"$dir/broker.log"
    java "${opts[@]}" -cp "$BROKER_CP" kafka.Kafka "$dir/server.properties" \
        >"$dir/broker.out" 2>&1 </dev/null 9>&- &
    local pid=$!
    echo "$pid" >"$dir/broker.pid"

    if [[ -n "${STRAIT_KAFKA_WATCH_PID:-}" ]]; then
        watchdog "$pid" "$STRAIT_KAFKA_WATCH_PID" "${STRAIT_KAFKA_WATCH_CLEAN:-0}" "$dir" \
            </dev/null >/dev/null 2>&1 9>&- &
        disown
    fi

    local deadline=$((SECONDS + START_TIMEOUT_S))
    while :; do
        if ! alive "$pid"; then
            tail -n 40 "$dir/broker.out" "$dir/broker.log" >&2 || true
            die "$name: broker exited during startup (see $dir/broker.out)"
        fi
        if port_open "$port" && grep -q "Kafka Server started" "$dir/broker.log"; then
            break
        fi
        if ((SECONDS >= deadline)); then
            tail -n 40 "$dir/broker.out" "$dir/broker.log" >&2 || true
            kill -KILL "$pid" 2>/dev/null || true
            die "$name: broker not ready after ${START_TIMEOUT_S}s"
        fi
        sleep 0.1
    done
    echo "127.0.0.1:$port"
}

# watchdog BROKER_PID WATCH_PID CLEAN DATA_DIR: stops the broker once WATCH_PID is gone.
watchdog() {
    local pid="$1" watch="$2" clean="$3" dir="$4"
    while alive "$pid"; do
        if ! alive "$watch"; then
            kill -TERM "$pid" 2>/dev/null || true
            for _ in $(seq 1 100); do alive "$pid" || break; sleep 0.2; done
            kill -KILL "$pid" 2>/dev/null || true
            if [[ "$clean" == 1 ]]; then
                sleep 0.2
                rm -rf "$dir"
                rmdir "$(dirname "$dir")" 2>/dev/null || true
            fi
            return 0
        fi
        sleep 1
    done
}

stop() {
    [[ $# -eq 1 ]] || die "usage: stop DATA_DIR"
    local pidfile="$1/broker.pid" pid
    [[ -f "$pidfile" ]] || return 0
    pid="$(cat "$pidfile")"
    if alive "$pid" && kill -TERM "$pid" 2>/dev/null; then
        for _ in $(seq 1 200); do
            alive "$pid" || break
            sleep 0.1
        done
        if alive "$pid"; then
            echo "kafka.sh: broker $pid did not stop in 20s, killing" >&2
            kill -KILL "$pid" 2>/dev/null || true
            sleep 0.5
        fi
    fi
    rm -f "$pidfile"
}

tool() {
    [[ $# -ge 1 ]] || die "usage: tool CLASS ARGS..."
    fetch
    local class="$1"
    shift
    cds_opts tool
    exec java "${TOOL_JAVA_OPTS[@]}" "${CDS_OPTS[@]}" -cp "$CP" "$class" "$@"
}

cmd="${1:-}"
[[ $# -gt 0 ]] && shift
case "$cmd" in
    fetch) fetch; echo "$CACHE" ;;
    classpath) fetch; echo "$CP" ;;
    start) start "$@" ;;
    join) join "$@" ;;
    stop) stop "$@" ;;
    tool) tool "$@" ;;
    *) die "usage: kafka.sh fetch|classpath|start|join|stop|tool ..." ;;
esac
