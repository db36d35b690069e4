#!/usr/bin/env bash
# Shows that the strait binary needs nothing from its root, as in a FROM-scratch image: a
# directory holding only the binary and examples/mm2.properties (addresses pointed at two
# local Kafka clusters) becomes the root of `strait check` and of a short replication
# (`unshare --user --map-root-user --root`: a chroot without privileges; the host's network
# namespace, so the loopback brokers are reachable). No /etc, /proc, /dev, libc or CA store.
#
#   scripts/empty-root.sh [BINARY]   (default: the static musl release build)
#                                    SOURCE_PORT / TARGET_PORT change the ports 19392 / 29392
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$HERE/.."
KAFKA="$HERE/kafka.sh"
BIN="${1:-$ROOT/target/x86_64-unknown-linux-musl/release/strait}"
SOURCE_PORT="${SOURCE_PORT:-19392}"
TARGET_PORT="${TARGET_PORT:-29392}"
SOURCE="127.0.0.1:$SOURCE_PORT"
TARGET="127.0.0.1:$TARGET_PORT"
RECORDS=5000
WORK="$(mktemp -d)"
STRAIT_PID=""

die() { echo "empty-root.sh: $*" >&2; exit 1; }
cleanup() {
    [[ -n "$STRAIT_PID" ]] && kill -KILL "$STRAIT_PID" 2>/dev/null || true
    "$KAFKA" stop "$WORK/source" >/dev/null 2>&1 || true
    "$KAFKA" stop "$WORK/target" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT
step() { printf '==> %s\n' "$*"; }

[[ -x "$BIN" ]] || die "no binary at $BIN (cargo build --release --target x86_64-unknown-linux-musl)"
root="$WORK/root"
mkdir "$root"
cp "$BIN" "$root/strait"
sed -e "s/source-broker:9092/$SOURCE/" -e "s/target-broker:9092/$TARGET/" \
    "$ROOT/examples/mm2.properties" >"$root/mm2.properties"
in_root=(unshare --user --map-root-user --root="$root")
step "the root: $(cd "$root" && find . | sort | tr '\n' ' ')"
[[ "$(cd "$root" && find . -mindepth 1 | wc -l)" == 2 ]] || die "the root holds more than the binary and its config"

step "two single-node Kafka clusters: source $SOURCE, target $TARGET"
"$KAFKA" fetch >/dev/null
export STRAIT_KAFKA_WATCH_PID=$$
"$KAFKA" start source "$SOURCE_PORT" "$WORK/source" >/dev/null &
"$KAFKA" start target "$TARGET_PORT" "$WORK/target" >/dev/null &
wait %1 && wait %2
"$KAFKA" tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$SOURCE" --create \
    --topic orders --partitions 2 --replication-factor 1 >/dev/null
"$KAFKA" tool Workload produce --bootstrap "$SOURCE" --topic orders --count "$RECORDS" \
    --compression lz4 --value-size 100 >/dev/null

step "strait check /mm2.properties, in the empty root"
"${in_root[@]}" /strait check /mm2.properties || die "strait check failed in the empty root"

step "strait run /mm2.properties, in the empty root, until source.orders holds $RECORDS records"
METRICS=127.0.0.1:$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"${in_root[@]}" /strait run --metrics-listen "$METRICS" /mm2.properties 2>"$WORK/strait.log" &
STRAIT_PID=$!
have=0
for _ in $(seq 1 60); do
    sleep 1
    kill -0 "$STRAIT_PID" 2>/dev/null || { cat "$WORK/strait.log"; die "strait exited"; }
    have=$("$KAFKA" tool org.apache.kafka.tools.GetOffsetShell --bootstrap-server "$TARGET" \
        --topic source.orders 2>/dev/null | awk -F: '{s += $3} END {print s + 0}')
    [[ "$have" -ge "$RECORDS" ]] && break
done
[[ "$have" -ge "$RECORDS" ]] || { tail -n 30 "$WORK/strait.log"; die "source.orders holds $have of $RECORDS"; }
step "its /readyz and /metrics, from outside the root"
curl -fsS "http://$METRICS/readyz" || die "/readyz did not answer 200"
echo
curl -fsS "http://$METRICS/metrics" | grep -c '^kafka_connect_mirror_mirrorsourceconnector_record_count{' \
    || die "/metrics has no record_count series"
kill -TERM "$STRAIT_PID"
rc=0
wait "$STRAIT_PID" || rc=$?
STRAIT_PID=""
[[ $rc == 0 ]] || { tail -n 30 "$WORK/strait.log"; die "strait exited $rc after SIGTERM"; }
step "done: $have records replicated by a binary alone in its root, clean exit on SIGTERM"
