#!/usr/bin/env bash
# The end-to-end benchmark: strait side by side with Apache Kafka's MirrorMaker 2 (defaults and
# tuned) and with the brokers' own limits, on two local single-node clusters started once.
#
#   scripts/bench.sh [--runs N] [--records N] [--quick] [--out DIR] [--only LIST] [--no-latency]
#                    [--variants LIST] [--many TOPICS:PARTITIONS:RECORDS] [--target-latency MS]
#                    [--strait-set 'KEY = VALUE']...
#
#   --runs N      repetitions of every measurement; the table shows medians (default 3)
#   --records N   records of 1 KiB preloaded per variant (default 1048576, i.e. 1 GiB)
#   --quick       --runs 1 --records 150000 and short latency windows, unless given explicitly
#   --out DIR     where results.jsonl, table.md and the logs go (default: a new temp dir)
#   --only LIST   comma-separated replicators to run: strait,strait-coalesce,mm2-default,mm2-tuned,
#                 strait-tls,mm2-tuned-tls,strait-metrics,strait-eos,mm2-eos (default the first
#                 four; strait-eos is strait with exactly.once = true, mm2-eos mm2-tuned with
#                 MM2's exactly-once settings: both are done once a read_committed reader sees
#                 every record; strait-coalesce
#                 is strait with produce.coalesce.bytes = 262144; strait-metrics is strait serving
#                 /metrics, scraped every second while it runs; the -tls ones connect to both clusters over TLS,
#                 to SSL listeners the brokers then get, with a test CA made by openssl)
#   --no-latency  skip the end-to-end latency phase
#   --variants LIST  comma-separated source variants to replicate: none,lz4,small,many (default
#                 the first three; `many` is many low-traffic partitions, see --many)
#   --many T:P:R  the shape of variant `many`: T topics of P partitions, R records of 200 B in
#                 each partition, every record its own batch (default 800:10:10)
#   --strait-set 'KEY = VALUE'  one more line in every strait config (repeatable): a setting to
#                 measure, e.g. 'produce.max.in.flight = 32'
#   --target-latency MS  a distant target: every replicator reaches the target broker through
#                 Toxiproxy (scripts/toxiproxy.sh) adding MS ms each way (0: the proxy alone,
#                 the baseline to compare with, since the proxy itself caps the link); the broker
#                 advertises the proxy on a listener of its own, the measuring tools stay direct
#
# Steps: build strait (the static musl release binary); start the source and target brokers
# (full JIT, 1 GiB heap); preload the source topics bench-none / bench-lz4 / bench-small (6
# partitions, 1 KiB JSON-like records, 128 KiB batches none / lz4, and ~5 KiB batches none;
# with --variants ...,many also the topics bench-many-0000, -0001, ... of one-record batches);
# per run and variant, measure the limits with strait's own engines (benches/limits.rs: the
# source topic fetched into memory, written from memory into the target, and both at once),
# then time each replicator's catch-up until the remote topic on the target holds every record (fresh cluster aliases per
# run, so MM2 state and remote topics never collide; removed after each run); then end-to-end
# latency at a steady ~20% of the slowest replicator's catch-up rate, with its floor measured
# the same way without a replicator (the consumer on the source topic). scripts/bench/report.py
# prints the table from results.jsonl.
#
# Environment: SOURCE_PORT / TARGET_PORT (default 39092 / 49092), STRAIT_KAFKA_JAVA_OPTS (broker
# JVM options; default full JIT and a 1 GiB heap), STRAIT_CACHE (as for scripts/kafka.sh),
# STRAIT_BIN (a strait binary to measure instead of building one), LIMITS_IN_FLIGHT /
# LIMITS_CONNECTIONS (the produce-only limit's window and connections; strait's defaults).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
KAFKA="$HERE/kafka.sh"
MM2="$HERE/mm2.sh"

RUNS="" RECORDS="" QUICK=0 OUT="" ONLY="strait,strait-coalesce,mm2-default,mm2-tuned" LATENCY=1
VARIANT_LIST="none,lz4,small" MANY="800:10:10" TARGET_LATENCY="" STRAIT_SET=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --runs) RUNS="$2"; shift 2 ;;
        --records) RECORDS="$2"; shift 2 ;;
        --quick) QUICK=1; shift ;;
        --out) OUT="$2"; shift 2 ;;
        --only) ONLY="$2"; shift 2 ;;
        --no-latency) LATENCY=0; shift ;;
        --variants) VARIANT_LIST="$2"; shift 2 ;;
        --many) MANY="$2"; shift 2 ;;
        --target-latency) TARGET_LATENCY="$2"; shift 2 ;;
        --strait-set) STRAIT_SET+=("$2"); shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench.sh: unknown argument: $1 (see --help)" >&2; exit 2 ;;
    esac
done
if ((QUICK)); then
    RUNS="${RUNS:-1}" RECORDS="${RECORDS:-150000}" LAT_WARMUP_MS=8000 LAT_DURATION_MS=10000
else
    RUNS="${RUNS:-3}" RECORDS="${RECORDS:-1048576}" LAT_WARMUP_MS=10000 LAT_DURATION_MS=20000
fi
[[ "$RUNS" =~ ^[1-9][0-9]*$ && "$RECORDS" =~ ^[1-9][0-9]*$ ]] || { echo "bench.sh: bad --runs/--records" >&2; exit 2; }
IFS=, read -r -a REPLICATORS <<<"$ONLY"
for r in "${REPLICATORS[@]}"; do
    case "$r" in strait|strait-coalesce|mm2-default|mm2-tuned|strait-tls|mm2-tuned-tls|strait-metrics|strait-eos|mm2-eos) ;; *) echo "bench.sh: unknown replicator $r" >&2; exit 2 ;; esac
done
TLS=0
[[ ",$ONLY," != *-tls,* ]] || TLS=1
if [[ -n "$TARGET_LATENCY" ]]; then
    [[ "$TARGET_LATENCY" =~ ^[0-9]+$ ]] || { echo "bench.sh: bad --target-latency" >&2; exit 2; }
    ((TLS == 0)) || { echo "bench.sh: --target-latency goes without the -tls replicators" >&2; exit 2; }
fi
IFS=, read -r -a VARIANTS <<<"$VARIANT_LIST"
for v in "${VARIANTS[@]}"; do
    case "$v" in none|lz4|small|many) ;; *) echo "bench.sh: unknown variant $v" >&2; exit 2 ;; esac
done
IFS=: read -r MANY_TOPICS MANY_PARTITIONS MANY_PER_PARTITION <<<"$MANY"
[[ "$MANY_TOPICS" =~ ^[1-9][0-9]*$ && "$MANY_PARTITIONS" =~ ^[1-9][0-9]*$ && "$MANY_PER_PARTITION" =~ ^[1-9][0-9]*$ ]] \
    || { echo "bench.sh: bad --many (TOPICS:PARTITIONS:RECORDS)" >&2; exit 2; }
MANY_RECORD_SIZE=200

PARTITIONS=6
RECORD_SIZE=1024
SOURCE_PORT="${SOURCE_PORT:-39092}"
TARGET_PORT="${TARGET_PORT:-49092}"
SOURCE="127.0.0.1:$SOURCE_PORT"
TARGET="127.0.0.1:$TARGET_PORT"
# The SSL listeners (with a -tls replicator): two ports above the PLAINTEXT one, past the
# controller's.
SOURCE_TLS="127.0.0.1:$((SOURCE_PORT + 2))"
TARGET_TLS="127.0.0.1:$((TARGET_PORT + 2))"
export STRAIT_KAFKA_JAVA_OPTS="${STRAIT_KAFKA_JAVA_OPTS:--XX:TieredStopAtLevel=4 -Xms1g -Xmx1g}"
# Clients (perf tools, pollers, the latency producer) also run with the full JIT.
CLIENT_JAVA_OPTS=(-Xms256m -Xmx1g -XX:+UseParallelGC -Djava.awt.headless=true)
MM2_JAVA_OPTS=(-Xms256m -Xmx2g) # what Kafka's connect-mirror-maker.sh gives MirrorMaker
CATCHUP_TIMEOUT_MS=$((900 * 1000))
CLK_TCK="$(getconf CLK_TCK)"

OUT="${OUT:-$(mktemp -d -t strait-bench.XXXXXX)}"
mkdir -p "$OUT/logs" "$OUT/config"
OUT="$(cd "$OUT" && pwd)"
RESULTS="$OUT/results.jsonl"
: >"$RESULTS"
WORK="$(mktemp -d -t strait-bench-clusters.XXXXXX)"
PIDS=()

cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    "$KAFKA" stop "$WORK/source" >/dev/null 2>&1 || true
    "$KAFKA" stop "$WORK/target" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }
now_ms() { date +%s%3N; }

# --- set-up ------------------------------------------------------------------------------------

log "output: $OUT"
if [[ -n "${STRAIT_BIN:-}" ]]; then
    STRAIT="$STRAIT_BIN"
else
    # The binary strait ships: static musl, dlmalloc as its allocator.
    log "building strait (release, x86_64-unknown-linux-musl)"
    rustup target list --installed | grep -qx x86_64-unknown-linux-musl \
        || rustup target add x86_64-unknown-linux-musl
    (cd "$ROOT" && cargo build --release --target x86_64-unknown-linux-musl --quiet)
    STRAIT="$ROOT/target/x86_64-unknown-linux-musl/release/strait"
fi

log "building the limits tool (benches/limits.rs, release, x86_64-unknown-linux-musl)"
LIMITS="$(cd "$ROOT" && cargo bench --bench limits --no-run --target x86_64-unknown-linux-musl \
    --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "limits" and m.get("executable"):
        print(m["executable"])')"
[[ -x "$LIMITS" ]] || { log "the limits tool did not build (cargo bench --bench limits --no-run)"; exit 1; }

log "fetching Kafka jars (cached after the first run)"
CP="$("$KAFKA" classpath)"
CACHE="${CP%%/libs/*}"
CLASSES="$WORK/classes"
mkdir -p "$CLASSES"
javac -nowarn -encoding UTF-8 --release 17 -cp "$CP" -d "$CLASSES" "$HERE/bench/Latency.java"
CLIENT_JAVA_OPTS+=("-Dlog4j2.configurationFile=$CACHE/log4j2-tool.properties")
jrun() { java "${CLIENT_JAVA_OPTS[@]}" -cp "$CP:$CLASSES" "$@"; }
tool() { jrun Latency "$1" --bootstrap "$2" "${@:3}"; }

PAYLOADS="$WORK/payloads.txt"
python3 "$HERE/bench/payloads.py" "$PAYLOADS" --size "$RECORD_SIZE"

{
    echo "{\"kind\":\"meta\",\"runs\":$RUNS,\"records\":$RECORDS,\"record_size\":$RECORD_SIZE,"
    echo "\"partitions\":$PARTITIONS,\"quick\":$QUICK,\"nproc\":$(nproc),"
    echo "\"target_latency_ms\":${TARGET_LATENCY:-null},"
    echo "\"clk_tck\":$CLK_TCK,\"started\":\"$(date -u +%FT%TZ)\",\"strait_rev\":\"$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)\"}"
} | tr -d '\n' >>"$RESULTS"
echo >>"$RESULTS"

log "starting the source ($SOURCE) and target ($TARGET) brokers: $STRAIT_KAFKA_JAVA_OPTS"
export STRAIT_KAFKA_WATCH_PID=$$
BROKER_SETTINGS=(file.delete.delay.ms=1000 num.partitions=$PARTITIONS)
# tls_settings PORT: an SSL listener at PORT + 2 besides the PLAINTEXT one the tools use.
tls_settings() {
    ((TLS)) || return 0
    local p="$1"
    echo "listeners=PLAINTEXT://127.0.0.1:$p,CONTROLLER://127.0.0.1:$((p + 1)),SSL://127.0.0.1:$((p + 2))"
    echo "advertised.listeners=PLAINTEXT://127.0.0.1:$p,SSL://127.0.0.1:$((p + 2))"
    echo "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL"
    echo "ssl.keystore.type=PEM"
    echo "ssl.keystore.location=$WORK/tls/broker.pem"
}
if ((TLS)); then
    log "making a test CA and a broker certificate for 127.0.0.1 (openssl)"
    mkdir -p "$WORK/tls"
    (
        cd "$WORK/tls"
        openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=bench-ca -keyout ca.key \
            -out ca.pem -addext basicConstraints=critical,CA:TRUE \
            -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
        printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >broker.ext
        openssl req -newkey rsa:2048 -nodes -subj /CN=bench-broker -keyout broker.key \
            -out broker.csr 2>/dev/null
        openssl x509 -req -in broker.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
            -extfile broker.ext -out broker.crt 2>/dev/null
        cat broker.key broker.crt >broker.pem
    )
fi
mapfile -t SOURCE_TLS_SETTINGS < <(tls_settings "$SOURCE_PORT")
mapfile -t TARGET_TLS_SETTINGS < <(tls_settings "$TARGET_PORT")
# With --target-latency: the target's PROXIED listener (port + 3) advertises the proxy
# (port + 4), so that the replicators' every connection to the target crosses it.
TARGET_FOR_REPLICATORS="$TARGET"
if [[ -n "$TARGET_LATENCY" ]]; then
    TARGET_FOR_REPLICATORS="127.0.0.1:$((TARGET_PORT + 4))"
    TARGET_TLS_SETTINGS=(
        "listeners=PLAINTEXT://127.0.0.1:$TARGET_PORT,CONTROLLER://127.0.0.1:$((TARGET_PORT + 1)),PROXIED://127.0.0.1:$((TARGET_PORT + 3))"
        "advertised.listeners=PLAINTEXT://127.0.0.1:$TARGET_PORT,PROXIED://$TARGET_FOR_REPLICATORS"
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,PROXIED:PLAINTEXT"
    )
fi
"$KAFKA" start bench-source "$SOURCE_PORT" "$WORK/source" "${BROKER_SETTINGS[@]}" \
    "${SOURCE_TLS_SETTINGS[@]}" >/dev/null &
"$KAFKA" start bench-target "$TARGET_PORT" "$WORK/target" "${BROKER_SETTINGS[@]}" \
    "${TARGET_TLS_SETTINGS[@]}" >/dev/null &
wait %1 && wait %2
if [[ -n "$TARGET_LATENCY" ]]; then
    api="127.0.0.1:$((TARGET_PORT + 5))"
    log "starting Toxiproxy: $TARGET_FOR_REPLICATORS -> the target, $TARGET_LATENCY ms each way"
    # The server itself, so that the clean-up's SIGKILL reaches it.
    toxiproxy="$("$HERE/toxiproxy.sh" fetch)"
    "$toxiproxy" -host 127.0.0.1 -port "$((TARGET_PORT + 5))" >"$OUT/logs/toxiproxy.log" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 1 600); do curl -fsS "http://$api/version" >/dev/null 2>&1 && break; sleep 0.5; done
    curl -fsS -X POST "http://$api/proxies" -d "{\"name\":\"target\",\"listen\":\"$TARGET_FOR_REPLICATORS\",\"upstream\":\"127.0.0.1:$((TARGET_PORT + 3))\",\"enabled\":true}" >/dev/null
    for stream in upstream downstream; do
        curl -fsS -X POST "http://$api/proxies/target/toxics" -d "{\"name\":\"latency-$stream\",\"type\":\"latency\",\"stream\":\"$stream\",\"attributes\":{\"latency\":$TARGET_LATENCY,\"jitter\":0}}" >/dev/null
    done
fi
SOURCE_PID="$(cat "$WORK/source/broker.pid")"
TARGET_PID="$(cat "$WORK/target/broker.pid")"

codec_of() { [[ "$1" == lz4 ]] && echo lz4 || echo none; }
records_of() { [[ "$1" == many ]] && echo $((MANY_TOPICS * MANY_PARTITIONS * MANY_PER_PARTITION)) || echo "$RECORDS"; }
record_size_of() { [[ "$1" == many ]] && echo "$MANY_RECORD_SIZE" || echo "$RECORD_SIZE"; }
# topic_args VARIANT PREFIX: the Latency tool's arguments naming the variant's topics.
topic_args() {
    if [[ "$1" == many ]]; then echo "--topic ${2:-}bench-many --topics $MANY_TOPICS"; else echo "--topic ${2:-}bench-$1"; fi
}
# Producer batching of each variant: well-batched (128 KiB) or small (~5 KiB, linger 0).
batch_props_of() {
    if [[ "$1" == small ]]; then echo "batch.size=5120 linger.ms=0"; else echo "batch.size=131072 linger.ms=10"; fi
}

# producer_perf BOOTSTRAP TOPIC VARIANT [RECORDS]: ProducerPerformance, acks=all; prints its
# summary line.
producer_perf() {
    # shellcheck disable=SC2046 # the batch properties are separate words
    jrun org.apache.kafka.tools.ProducerPerformance --topic "$2" --num-records "${4:-$RECORDS}" \
        --payload-file "$PAYLOADS" --throughput -1 --producer-props "bootstrap.servers=$1" acks=all \
        "compression.type=$(codec_of "$3")" $(batch_props_of "$3") buffer.memory=134217728 \
        2>>"$OUT/logs/perf.err" | tail -n 1
}

du_bytes() { # bytes of the log segments (not the preallocated indexes) of topic $2 under $1
    local f s=0
    for f in "$1"/logs/"$2"-[0-9]*/*.log; do
        [[ -f "$f" ]] && s=$((s + $(stat -c %s "$f")))
    done
    echo "$s"
}

emit() { echo "$1" >>"$RESULTS"; }

# --- preload -----------------------------------------------------------------------------------

declare -A SOURCE_BYTES
for v in "${VARIANTS[@]}"; do
    # shellcheck disable=SC2046 # topic_args gives separate words
    if [[ "$v" == many ]]; then
        log "preloading bench-many: $MANY_TOPICS topics x $MANY_PARTITIONS partitions x $MANY_PER_PARTITION records of $MANY_RECORD_SIZE B, one per batch"
        tool create "$SOURCE" $(topic_args many) --partitions "$MANY_PARTITIONS"
        tool fill "$SOURCE" $(topic_args many) --records "$MANY_PER_PARTITION" --size "$MANY_RECORD_SIZE" \
            2>>"$OUT/logs/perf.err"
    else
        log "preloading bench-$v: $RECORDS records of $RECORD_SIZE B, codec $(codec_of "$v"), $(batch_props_of "$v")"
        tool create "$SOURCE" --topic "bench-$v" --partitions "$PARTITIONS"
        line="$(producer_perf "$SOURCE" "bench-$v" "$v")"
        log "  $line"
    fi
    # shellcheck disable=SC2046
    have="$(tool count "$SOURCE" $(topic_args "$v"))"
    [[ "$have" == "$(records_of "$v")" ]] || { log "bench-$v holds $have records, not $(records_of "$v")"; exit 1; }
    SOURCE_BYTES[$v]="$(du_bytes "$WORK/source" "bench-$v")"
    emit "{\"kind\":\"preload\",\"variant\":\"$v\",\"records\":$(records_of "$v"),\"source_bytes\":${SOURCE_BYTES[$v]}}"
done

# --- the limits no replicator can beat ------------------------------------------------------

# Each side alone, with strait's own engines (benches/limits.rs): the fetch engine reads the
# source topic into memory (batches split and CRC-checked), then the produce engine writes
# what it read into a fresh target topic with nothing fetched meanwhile. A replicator does both
# at once on the same machine. The produce side runs at LIMITS_IN_FLIGHT batches in flight per
# partition: strait's default, 5 (32 wrote `none` slower into the local broker: 119 MB/s vs 166),
# over LIMITS_CONNECTIONS connections to the target broker: strait's default, 2.
LIMITS_IN_FLIGHT="${LIMITS_IN_FLIGHT:-5}"
LIMITS_CONNECTIONS="${LIMITS_CONNECTIONS:-2}"
side_limits() { # VARIANT RUN
    local v="$1" run="$2" topic="limit-$1-$2" line
    line="$("$LIMITS" --source "$SOURCE" --topic "bench-$v" --target "$TARGET" --to "$topic" \
        --in-flight "$LIMITS_IN_FLIGHT" --connections "$LIMITS_CONNECTIONS" 2>>"$OUT/logs/limits.err")" || { log "  limits $v run $run failed (logs/limits.err)"; return 0; }
    python3 - "$line" "$v" "$run" >>"$RESULTS" <<'PY'
import json, sys
m, v, run = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
both = max(m["both_fetch_s"], m["both_produce_s"])
for limit, seconds in (("fetch", m["fetch_s"]), ("ingest", m["produce_s"]), ("machine", both)):
    print(json.dumps({"kind": "limit", "limit": limit, "variant": v, "run": run,
                      "records_per_s": m["records"] / seconds, "seconds": seconds}))
PY
    log "  limits $v run $run: $line"
    tool delete "$TARGET" --regex "$topic(-both)?(-progress)?" >/dev/null
}


# --- replicators -------------------------------------------------------------------------------

# write_config REPLICATOR VARIANT SRC_ALIAS TGT_ALIAS TOPIC FILE
write_config() {
    local r="$1" v="$2" a="$3" t="$4" topic="$5" f="$6"
    {
        echo "clusters = $a, $t"
        if [[ "$r" == *-tls ]]; then
            echo "$a.bootstrap.servers = $SOURCE_TLS"
            echo "$t.bootstrap.servers = $TARGET_TLS"
            echo "security.protocol = SSL"
            echo "ssl.truststore.type = PEM"
            echo "ssl.truststore.location = $WORK/tls/ca.pem"
        else
            echo "$a.bootstrap.servers = $SOURCE"
            echo "$t.bootstrap.servers = $TARGET_FOR_REPLICATORS"
        fi
        echo "$a->$t.enabled = true"
        echo "$a->$t.topics = $topic"
        echo "replication.factor = 1"
        if [[ "$r" == strait* ]]; then
            echo "internal.topic.replication.factor = 1"
            [[ "$r" != strait-coalesce ]] || echo "produce.coalesce.bytes = 262144"
            [[ "$r" != strait-eos ]] || echo "exactly.once = true"
            local line
            for line in "${STRAIT_SET[@]}"; do echo "$line"; done
            return 0
        fi
        echo "checkpoints.topic.replication.factor = 1"
        echo "heartbeats.topic.replication.factor = 1"
        echo "offset-syncs.topic.replication.factor = 1"
        echo "offset.storage.replication.factor = 1"
        echo "status.storage.replication.factor = 1"
        echo "config.storage.replication.factor = 1"
        # No authorizer on the test brokers (strait does not sync ACLs either).
        echo "sync.topic.acls.enabled = false"
        # Without these MM2 scans the class path for plugins for 30-40 s at start.
        echo "plugin.discovery = service_load"
        echo "$a.plugin.discovery = service_load"
        echo "$t.plugin.discovery = service_load"
        [[ "$r" == mm2-tuned* || "$r" == mm2-eos ]] || return 0
        if [[ "$r" == mm2-eos ]]; then
            # Exactly-once as MM2's docs (KIP-618) set it up in dedicated mode: the worker
            # switch, the internal REST server it needs, read_committed source consumers.
            echo "$t.exactly.once.source.support = enabled"
            echo "dedicated.mode.enable.internal.rest = true"
            echo "listeners = http://127.0.0.1:0"
            echo "$a.consumer.isolation.level = read_committed"
        fi
        echo "tasks.max = $PARTITIONS"
        echo "$t.producer.enable.idempotence = true"
        echo "$t.producer.acks = all"
        echo "$t.producer.max.in.flight.requests.per.connection = 5"
        echo "$t.producer.compression.type = $(codec_of "$v")"
        echo "$t.producer.batch.size = 524288"
        echo "$t.producer.linger.ms = 20"
        echo "$t.producer.buffer.memory = 134217728"
        echo "$t.producer.max.request.size = 4194304"
        echo "$a.consumer.fetch.max.bytes = 104857600"
        echo "$a.consumer.max.partition.fetch.bytes = 10485760"
        echo "$a.consumer.max.poll.records = 5000"
    } >"$f"
}

# launch REPLICATOR CONFIG LOG: starts it in the background; sets LAUNCHED_PID and LAUNCHED_MS.
launch() {
    local r="$1" cfg="$2" logf="$3" t pid=""
    t="$(now_ms)"
    if [[ "$r" == strait-metrics ]]; then
        local addr
        addr="127.0.0.1:$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
        "$STRAIT" run --metrics-listen "$addr" "$cfg" >"$logf" 2>&1 &
        local pid=$!
        # A scraper far more eager than Prometheus' usual 15-30 s: every second.
        (while kill -0 "$pid" 2>/dev/null; do
            curl -fsS "http://$addr/metrics" >/dev/null 2>&1 || true
            sleep 1
        done) &
    elif [[ "$r" == strait* ]]; then
        "$STRAIT" run "$cfg" >"$logf" 2>&1 &
    else
        local clusters
        clusters="$(sed -n 's/^clusters = .*, //p' "$cfg")"
        MM2_CLUSTERS="$clusters" MM2_LOG="$logf" "$MM2" run "$cfg" "${MM2_JAVA_OPTS[@]}" \
            >"$logf.out" 2>&1 &
    fi
    LAUNCHED_PID="${pid:-$!}"
    LAUNCHED_MS="$t"
    PIDS+=("$LAUNCHED_PID")
}

stop_replicator() { # PID
    kill -TERM "$1" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}

# wait_ready FILE PID: until FILE has a line "ready" (or PID died).
wait_ready() {
    while ! grep -qx ready "$1" 2>/dev/null; do
        kill -0 "$2" 2>/dev/null || { log "helper died: $(cat "$1" "$1.err" 2>/dev/null | tail -n 5)"; return 1; }
        sleep 0.05
    done
}

remove_run_topics() { # SRC_ALIAS TGT_ALIAS [SOURCE_TOPIC]
    tool delete "$TARGET" --regex ".*($1|$2).*" >/dev/null || true
    tool delete "$SOURCE" --regex ".*$2.*${3:+|$3}" >/dev/null || true
}

short_of() {
    case "$1" in
        strait) echo st ;; strait-coalesce) echo sc ;; mm2-default) echo md ;; mm2-tuned) echo mt ;;
        strait-tls) echo sx ;; mm2-tuned-tls) echo mx ;; strait-metrics) echo sm ;;
        strait-eos) echo se ;; mm2-eos) echo me ;;
        direct) echo dr ;;
    esac
}

catchup() { # REPLICATOR VARIANT RUN
    local r="$1" v="$2" run="$3" a t tag cfg remote watch_out watch_pid rc line tbytes topics
    tag="$(short_of "$r")$v$run"
    a="s$tag" t="t$tag"
    remote="$a.bench-$v"
    cfg="$OUT/config/$tag.properties"
    topics="bench-$v"
    [[ "$v" != many ]] || topics="bench-many-.*"
    write_config "$r" "$v" "$a" "$t" "$topics" "$cfg"
    watch_out="$OUT/logs/watch-$tag"
    rm -f "$WORK/launch"
    # shellcheck disable=SC2046 # topic_args gives separate words
    local isolation=read_uncommitted
    [[ "$r" != *-eos ]] || isolation=read_committed
    tool watch "$TARGET" $(topic_args "$v" "$a.") --expect "$(records_of "$v")" --pid-file "$WORK/launch" \
        --isolation "$isolation" \
        --broker-pids "$SOURCE_PID,$TARGET_PID" --timeout-ms "$CATCHUP_TIMEOUT_MS" \
        --tag kind=catchup --tag "replicator=$r" --tag "variant=$v" --tag "run=$run" \
        --tag "records=$(records_of "$v")" --tag "record_size=$(record_size_of "$v")" \
        --tag "source_bytes=${SOURCE_BYTES[$v]}" --tag "clk_tck=$CLK_TCK" \
        >"$watch_out" 2>"$watch_out.err" &
    watch_pid=$!
    PIDS+=("$watch_pid")
    wait_ready "$watch_out" "$watch_pid"
    launch "$r" "$cfg" "$OUT/logs/$tag.log"
    echo "$LAUNCHED_PID $LAUNCHED_MS" >"$WORK/launch.tmp"
    mv "$WORK/launch.tmp" "$WORK/launch"
    rc=0
    wait "$watch_pid" || rc=$?
    tbytes="$(du_bytes "$WORK/target" "$remote")"
    stop_replicator "$LAUNCHED_PID"
    if [[ "$r" == mm2-eos ]]; then
        # Proof that MM2 ran exactly-once: its transactional producers registered.
        log "  $r $v run $run: $(grep -c 'transactionalId=.*ProducerId set to' "$OUT/logs/$tag.log" || true) transactional producer(s) registered"
    fi
    line="$(grep '^{' "$watch_out" | tail -n 1)"
    if [[ -n "$line" ]]; then
        emit "${line%\}},\"target_bytes\":$tbytes,\"exit\":$rc}"
        log "  $r $v run $run: $(python3 "$HERE/bench/report.py" --one "$line")"
    else
        log "  $r $v run $run: no result (see $watch_out.err)"
    fi
    ((rc == 0)) || log "  $r $v run $run: incomplete (exit $rc); log: $OUT/logs/$tag.log"
    remove_run_topics "$a" "$t"
}

# The limits of a variant are measured right before its replicators, run by run: the page
# cache's writeback of what earlier runs wrote slows the target broker by up to half, so
# limits measured apart (all first, as until 2026-12) and catch-ups compare badly.
log "catch-up: $RUNS run(s) x ${#VARIANTS[@]} variants x ${REPLICATORS[*]}, each variant after its limits"
for run in $(seq 1 "$RUNS"); do
    for v in "${VARIANTS[@]}"; do
        # The limits of one-record batches: not measured.
        [[ "$v" == many ]] || side_limits "$v" "$run"
        for r in "${REPLICATORS[@]}"; do
            catchup "$r" "$v" "$run"
        done
    done
done

# --- end-to-end latency ------------------------------------------------------------------------

# latency_run REPLICATOR RUN RATE: the producer writes into a source topic at RATE while a
# consumer on the target takes now - CreateTime of every replicated record. REPLICATOR
# "direct" runs no replicator and the consumer reads the source topic itself: the floor that
# the producer, the broker and the consumer set for every replicator on this machine.
latency_run() {
    local r="$1" run="$2" rate="$3" tag a t topic cfg lat_out lat_pid line count
    local read_from="$TARGET" read_topic
    tag="l$(short_of "$r")$run"
    a="s$tag" t="t$tag" topic="lat-$tag" read_topic="$a.lat-$tag"
    tool create "$SOURCE" --topic "$topic" --partitions "$PARTITIONS"
    if [[ "$r" == direct ]]; then
        read_from="$SOURCE" read_topic="$topic"
    else
        cfg="$OUT/config/$tag.properties"
        write_config "$r" none "$a" "$t" "$topic" "$cfg"
        launch "$r" "$cfg" "$OUT/logs/$tag.log"
    fi
    lat_out="$OUT/logs/latency-$tag"
    tool latency "$read_from" --topic "$read_topic" --warmup-ms "$LAT_WARMUP_MS" \
        --duration-ms "$LAT_DURATION_MS" --timeout-ms 120000 --tag kind=latency \
        --tag "replicator=$r" --tag "run=$run" --tag "rate=$rate" \
        --tag "expected=$((rate * LAT_DURATION_MS / 1000))" \
        >"$lat_out" 2>"$lat_out.err" &
    lat_pid=$!
    PIDS+=("$lat_pid")
    if wait_ready "$lat_out" "$lat_pid"; then
        count=$((rate * (LAT_WARMUP_MS + LAT_DURATION_MS + 2000) / 1000))
        jrun Workload produce --bootstrap "$SOURCE" --topic "$topic" --count "$count" \
            --value-size "$RECORD_SIZE" --rate "$rate" >"$lat_out.producer" 2>&1 || true
        wait "$lat_pid" || true
        line="$(grep '^{' "$lat_out" | tail -n 1)"
        if [[ -n "$line" ]]; then
            emit "$line"
            log "  latency $r run $run: $line"
        fi
    fi
    [[ "$r" == direct ]] || stop_replicator "$LAUNCHED_PID"
    remove_run_topics "$a" "$t" "$topic"
}

if ((LATENCY)); then
    rate="$(python3 "$HERE/bench/report.py" --latency-rate "$RESULTS")"
    log "end-to-end latency at $rate records/s (~20% of the slowest replicator's catch-up, variant none)"
    for run in $(seq 1 "$RUNS"); do
        for r in direct "${REPLICATORS[@]}"; do
            # Coalescing only acts on a backlog; at a steady load it is plain strait. TLS is
            # measured for its cost in catch-up only.
            [[ "$r" == strait-coalesce || "$r" == strait-metrics || "$r" == *-tls ]] || latency_run "$r" "$run" "$rate"
        done
    done
fi

python3 "$HERE/bench/report.py" "$RESULTS" | tee "$OUT/table.md"
log "raw results: $RESULTS; table: $OUT/table.md; logs: $OUT/logs"
