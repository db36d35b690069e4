#!/usr/bin/env bash
# Runs Apache Kafka's own MirrorMaker 2 in dedicated mode, from the Maven Central jars that
# scripts/kafka.sh fetches (connect-mirror with the Connect runtime it depends on), so that
# tests and benchmarks can compare strait with the real thing.
#
#   scripts/mm2.sh run MM2_PROPERTIES [JVM_OPTION ...]
#       exec java JVM_OPTIONS org.apache.kafka.connect.mirror.MirrorMaker MM2_PROPERTIES
#       JVM options default to -Xmx512m; any given replace that default.
#
# Environment:
#   MM2_LOG                  log file (appended to); default stderr. INFO for
#                            org.apache.kafka.connect.mirror, WARN for everything else
#   MM2_CLUSTERS             optional MirrorMaker --clusters value: only drive the flows into
#                            these (space-separated) target aliases
#   STRAIT_KAFKA_WATCH_PID   kill MirrorMaker once this process is gone
#   STRAIT_CACHE             cache root, as for scripts/kafka.sh
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
MAIN_CLASS=org.apache.kafka.connect.mirror.MirrorMaker

die() { echo "mm2.sh: $*" >&2; exit 1; }

alive() {
    local st
    st="$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" || return 1
    [[ -n "$st" && "$st" != Z ]]
}

# log4j2 configuration for appender $1 (a Console or File appender definition).
log_config() {
    cat <<EOF
status = error
$1
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = OUT
logger.mirror.name = org.apache.kafka.connect.mirror
logger.mirror.level = INFO
# One line per transactional producer registered (exactly-once mode): its transactional id.
logger.transactions.name = org.apache.kafka.clients.producer.internals.TransactionManager
logger.transactions.level = INFO
EOF
}

run() {
    [[ $# -ge 1 ]] || die "usage: run MM2_PROPERTIES [JVM_OPTION ...]"
    local props="$1"
    shift
    [[ -f "$props" ]] || die "no such file: $props"
    local opts=("$@")
    [[ ${#opts[@]} -gt 0 ]] || opts=(-Xmx512m)

    local cp cache conf
    cp="$(bash "$HERE/kafka.sh" classpath)" || die "kafka.sh classpath failed"
    cache="${cp%%/libs/*}"
    if [[ -n "${MM2_LOG:-}" ]]; then
        : >>"$MM2_LOG"
        conf="$MM2_LOG.log4j2.properties"
        log_config "appender.out.type = File
appender.out.fileName = $MM2_LOG" >"$conf"
    else
        conf="$cache/log4j2-mm2-stderr.properties"
        if [[ ! -f "$conf" ]]; then
            log_config "appender.out.type = Console
appender.out.target = SYSTEM_ERR" >"$conf.$$"
            mv "$conf.$$" "$conf"
        fi
    fi

    local args=("$props")
    if [[ -n "${MM2_CLUSTERS:-}" ]]; then
        # shellcheck disable=SC2206 # one alias per word
        args+=(--clusters ${MM2_CLUSTERS})
    fi

    if [[ -n "${STRAIT_KAFKA_WATCH_PID:-}" ]]; then
        local watch="$STRAIT_KAFKA_WATCH_PID" self=$$
        (
            while alive "$self"; do
                if ! alive "$watch"; then
                    kill -TERM "$self" 2>/dev/null || true
                    for _ in $(seq 1 50); do alive "$self" || exit 0; sleep 0.2; done
                    kill -KILL "$self" 2>/dev/null || true
                    exit 0
                fi
                sleep 1
            done
        ) </dev/null >/dev/null 2>&1 &
        disown
    fi

    # After exec this shell's pid is MirrorMaker's, which the watchdog above watches.
    exec java "${opts[@]}" -Djava.awt.headless=true "-Dlog4j2.configurationFile=$conf" \
        -cp "$cp" "$MAIN_CLASS" "${args[@]}"
}

cmd="${1:-}"
[[ $# -gt 0 ]] && shift
case "$cmd" in
    run) run "$@" ;;
    *) die "usage: mm2.sh run MM2_PROPERTIES [JVM_OPTION ...]" ;;
esac
