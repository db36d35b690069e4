#!/usr/bin/env bash
# The chaos soak: strait replicating a topic under a sequence-numbered producer while strait
# is SIGKILLed and restarted at random moments, the source and target brokers are SIGKILLed
# and restarted, and Toxiproxy cuts and blackholes either side; then the target is checked
# against the source with the Java consumer (records lost, order, duplicates per resend).
# The soak itself is the ignored test `chaos_soak` in tests/soak.rs; this runs it.
#
#   scripts/soak.sh DURATION [SEED]   DURATION of the faults: 30m, 600s or 600 (seconds)
#
# Output goes to the terminal and to target/soak-<time>.log; the last lines are the figures.
# Needs what the tests need: Java, Maven (first run: Kafka jars), Go (first run: Toxiproxy).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

die() { echo "soak.sh: $*" >&2; exit 1; }

[[ $# -ge 1 ]] || die "usage: soak.sh DURATION [SEED]"
case "$1" in
    *m) secs=$((${1%m} * 60)) ;;
    *s) secs=${1%s} ;;
    *) secs=$1 ;;
esac
[[ "$secs" =~ ^[0-9]+$ && "$secs" -gt 0 ]] || die "bad duration: $1"
export STRAIT_SOAK_SECS="$secs"
if [[ $# -ge 2 ]]; then export STRAIT_SOAK_SEED="$2"; fi

scripts/kafka.sh fetch >/dev/null
scripts/toxiproxy.sh fetch >/dev/null
mkdir -p target
log="target/soak-$(date -u +%Y%m%dT%H%M%SZ).log"
echo "soak.sh: $secs s of faults; log in $log" >&2
cargo test --test soak -- --ignored --nocapture chaos_soak 2>&1 | tee "$log"
