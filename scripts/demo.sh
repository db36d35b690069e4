#!/usr/bin/env bash
# The demo: two local Apache Kafka clusters, sample topics `orders` and `payments` on the
# source, strait replicating them with the minimal MirrorMaker 2 config of
# examples/mm2.properties (bootstrap addresses pointed at the local clusters), until the
# target holds `source.orders` and `source.payments` and the lag is zero.
#
#   scripts/demo.sh            (SOURCE_PORT / TARGET_PORT to change the ports 19092 / 29092)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$HERE/.."
KAFKA="$HERE/kafka.sh"
SOURCE_PORT="${SOURCE_PORT:-19092}"
TARGET_PORT="${TARGET_PORT:-29092}"
SOURCE="127.0.0.1:$SOURCE_PORT"
TARGET="127.0.0.1:$TARGET_PORT"
WORK="$(mktemp -d)"
STRAIT_PID=""

cleanup() {
    [[ -n "$STRAIT_PID" ]] && kill -TERM "$STRAIT_PID" 2>/dev/null && wait "$STRAIT_PID" 2>/dev/null || true
    "$KAFKA" stop "$WORK/source" >/dev/null 2>&1 || true
    "$KAFKA" stop "$WORK/target" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

step() { printf '\n==> %s\n' "$*"; }

step "building strait (release)"
(cd "$ROOT" && cargo build --release --quiet)
STRAIT="$ROOT/target/release/strait"

step "fetching Apache Kafka from Maven Central (cached after the first run)"
"$KAFKA" fetch >/dev/null

step "starting two single-node KRaft clusters: source $SOURCE, target $TARGET"
export STRAIT_KAFKA_WATCH_PID=$$
"$KAFKA" start source "$SOURCE_PORT" "$WORK/source" >/dev/null &
"$KAFKA" start target "$TARGET_PORT" "$WORK/target" >/dev/null &
wait %1 && wait %2

step "creating and loading topics orders (3 partitions) and payments (2 partitions) on the source"
"$KAFKA" tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$SOURCE" --create --topic orders --partitions 3 --replication-factor 1 >/dev/null
"$KAFKA" tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$SOURCE" --create --topic payments --partitions 2 --replication-factor 1 >/dev/null
"$KAFKA" tool Workload produce --bootstrap "$SOURCE" --topic orders --count 20000 --compression lz4 --value-size 200 --headers
"$KAFKA" tool Workload produce --bootstrap "$SOURCE" --topic payments --count 10000 --compression zstd --value-size 100 \
    --transactional-id demo-payments --txn-size 100 --abort-every 10

step "strait run mm2.properties (the minimal MirrorMaker 2 config, addresses pointed at the local clusters)"
sed -e "s/source-broker:9092/$SOURCE/" -e "s/target-broker:9092/$TARGET/" "$ROOT/examples/mm2.properties" >"$WORK/mm2.properties"
cat "$WORK/mm2.properties" | grep -v '^#' | grep -v '^$'
"$STRAIT" run "$WORK/mm2.properties" 2>"$WORK/strait.log" &
STRAIT_PID=$!

end_offsets() { # sum of end offsets of one topic (read_committed is what the target gets)
    "$KAFKA" tool org.apache.kafka.tools.GetOffsetShell --bootstrap-server "$1" --topic "$2" 2>/dev/null |
        awk -F: '{s += $3} END {print s + 0}' || echo 0
}
committed_count() { # records a read_committed consumer sees
    "$KAFKA" tool Workload dump --bootstrap "$1" --topic "$2" --isolation read_committed 2>/dev/null | wc -l || echo 0
}

step "waiting for the target to catch up"
want_orders=$(committed_count "$SOURCE" orders)
want_payments=$(committed_count "$SOURCE" payments)
lag=unknown
for i in $(seq 1 60); do
    sleep 2
    if ! kill -0 "$STRAIT_PID" 2>/dev/null; then
        echo "strait exited:"; tail -n 30 "$WORK/strait.log"; exit 1
    fi
    have_orders=$(end_offsets "$TARGET" source.orders)
    have_payments=$(end_offsets "$TARGET" source.payments)
    lag=$(( want_orders - have_orders + want_payments - have_payments ))
    echo "  target: source.orders=$have_orders/$want_orders source.payments=$have_payments/$want_payments  lag=$lag"
    [[ $lag -le 0 ]] && break
done
[[ "$lag" != unknown && $lag -le 0 ]] || { echo "no catch-up; strait log:"; tail -n 40 "$WORK/strait.log"; exit 1; }

step "topics on the target"
"$KAFKA" tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$TARGET" --list

step "the last status lines strait logged"
grep -E "replication status|created topic|replicating" "$WORK/strait.log" | tail -n 8

step "a few replicated records (console consumer on the target)"
"$KAFKA" tool org.apache.kafka.tools.consumer.ConsoleConsumer --bootstrap-server "$TARGET" --topic source.orders \
    --from-beginning --max-messages 3 --property print.key=true --property print.headers=true \
    --property print.timestamp=true 2>/dev/null | cut -c1-160

if [[ $lag -le 0 ]]; then
    step "done: lag 0, the target holds every committed source record"
else
    step "the target did not catch up (lag $lag); strait log: $WORK/strait.log"
    tail -n 30 "$WORK/strait.log"
    exit 1
fi
