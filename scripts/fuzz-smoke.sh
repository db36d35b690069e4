#!/usr/bin/env bash
# Fuzz smoke run for CI: builds every cargo-fuzz target of fuzz/ and runs each for a short
# while on its seed corpus from testdata/ (seeds, and testdata/fuzz-corpus/: the kept corpus
# of the last long campaign), in a temporary corpus directory (nothing is
# written into the repository except the git-ignored fuzz/artifacts).
# Fails if any target crashes, runs out of memory or times out, printing the input that did.
#
# Installs what it needs on first use: the nightly toolchain (minimal profile) and
# cargo-fuzz (`cargo install`, into the default cargo bin directory).
#
# Environment:
#   FUZZ_SECONDS     run time per target (default 20)
#   FUZZ_RUNS        executions per target instead of a run time (a long campaign)
#   FUZZ_CORPUS      keep each target's corpus in this directory (<dir>/<target>, seeded from
#                    testdata/ on first use) instead of a temporary one
#   FUZZ_TOOLCHAIN   toolchain that builds the targets (default nightly)
#   FUZZ_TARGETS     space-separated targets to run (default: all of fuzz/fuzz_targets)
#   FUZZ_TARGET_DIR  where the targets are built (default: $STRAIT_CACHE or ~/.cache/strait, /fuzz-target)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"

SECONDS_PER_TARGET="${FUZZ_SECONDS:-20}"
TOOLCHAIN="${FUZZ_TOOLCHAIN:-nightly}"
# Builds go to a cache outside the clone (a cold sanitizer build of the crate and libFuzzer
# takes minutes on 2 cores; CI clones afresh each time).
TARGET_DIR="${FUZZ_TARGET_DIR:-${STRAIT_CACHE:-$HOME/.cache/strait}/fuzz-target}"
ARTIFACTS="$ROOT/fuzz/artifacts"

say() { printf 'fuzz-smoke: %s\n' "$*"; }
die() { say "$*" >&2; exit 1; }

# --- tools -------------------------------------------------------------------------------------

command -v rustup >/dev/null || die "rustup not found"
command -v "${CXX:-c++}" >/dev/null || die "no C++ compiler (${CXX:-c++}); libFuzzer needs one"
host="$(rustc -vV | sed -n 's/^host: //p')"
installed="$(rustup toolchain list | awk '{print $1}')"
if ! grep -qx -e "$TOOLCHAIN" -e "$TOOLCHAIN-$host" <<<"$installed"; then
    say "installing the $TOOLCHAIN toolchain"
    rustup toolchain install "$TOOLCHAIN" --profile minimal --no-self-update
fi
cargo "+$TOOLCHAIN" --version
if ! cargo fuzz --version >/dev/null 2>&1; then
    say "installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi
cargo fuzz --version

# --- seed corpora ------------------------------------------------------------------------------

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

corpora="${FUZZ_CORPUS:-$work}"

# `batch`: Fetch `records` bytes as they are.
mkdir -p "$work/batch"
cp testdata/batches/*.bin "$work/batch/"

# `frame`: the response frames of testdata/frames/ behind the target's 3-byte prefix (API
# key, version, chunking; see fuzz/fuzz_targets/frame.rs), once whole and once in chunks.
mkdir -p "$work/frame"
for f in testdata/frames/*.bin; do
    name="$(basename "$f" .bin)"
    [[ "$name" =~ ^([a-z-]+)-v([0-9]+)- ]] || die "$f: expected <api>-v<version>-<what>.bin"
    case "${BASH_REMATCH[1]}" in
        produce) key=0 ;;
        fetch) key=1 ;;
        list-offsets) key=2 ;;
        metadata) key=3 ;;
        offset-commit) key=8 ;;
        offset-fetch) key=9 ;;
        find-coordinator) key=10 ;;
        list-groups) key=16 ;;
        api-versions) key=18 ;;
        create-topics) key=19 ;;
        init-producer-id) key=22 ;;
        describe-acls) key=29 ;;
        create-acls) key=30 ;;
        describe-configs) key=32 ;;
        create-partitions) key=37 ;;
        incremental-alter-configs) key=44 ;;
        *) die "$f: unknown API ${BASH_REMATCH[1]}" ;;
    esac
    version="${BASH_REMATCH[2]}"
    for chunking in 0 28; do
        { printf "\\x$(printf %02x "$key")\\x$(printf %02x "$version")\\x$(printf %02x "$chunking")"
          cat "$f"; } >"$work/frame/$name-$chunking"
    done
done

# Each target's corpus as the last long campaign left it (minimized with `cargo fuzz cmin`):
# inputs the seeds alone take the fuzzer a long time to reach.
for target in batch frame; do
    cp testdata/fuzz-corpus/"$target"/* "$work/$target/"
done

# --- build and run -----------------------------------------------------------------------------

fuzz=(cargo "+$TOOLCHAIN" fuzz)
targets="${FUZZ_TARGETS:-$(cd fuzz/fuzz_targets && ls -- *.rs | sed 's/\.rs$//' | tr '\n' ' ')}"

start=$SECONDS
say "building: $targets"
"${fuzz[@]}" build --target-dir "$TARGET_DIR"
say "built in $((SECONDS - start)) s"

if [[ -n "${FUZZ_RUNS:-}" ]]; then
    limit=(-runs="$FUZZ_RUNS") what="$FUZZ_RUNS executions"
else
    limit=(-max_total_time="$SECONDS_PER_TARGET") what="$SECONDS_PER_TARGET s"
fi

failed=()
for target in $targets; do
    corpus="$corpora/$target"
    if [[ "$corpus" != "$work/$target" ]]; then
        mkdir -p "$corpus"
        cp -n "$work/$target/"* "$corpus/"
    fi
    mkdir -p "$corpus" "$ARTIFACTS/$target"
    log="$work/$target.log"
    say "running $target for $what ($(ls "$corpus" | wc -l) inputs to start from)"
    t0=$SECONDS
    if "${fuzz[@]}" run --target-dir "$TARGET_DIR" "$target" "$corpus" -- \
        "${limit[@]}" -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$ARTIFACTS/$target/" >"$log" 2>&1; then
        grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)' "$log" || true
        say "$target: ok ($((SECONDS - t0)) s, corpus $(ls "$corpus" | wc -l) inputs)"
    else
        cp "$log" "$ARTIFACTS/$target/smoke.log"
        # The panic or sanitizer message without the stack traces; the full output is kept
        # in smoke.log next to the input.
        { grep -E -A3 'panicked at' "$log"; grep -E '==[0-9]+== ?ERROR: |^SUMMARY: ' "$log"; } \
            | head -n 20 || true
        artifact="$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)"
        if [[ -n "$artifact" ]]; then
            say "$target FAILED after $((SECONDS - t0)) s: input saved to $artifact"
            say "  reproduce: cargo +$TOOLCHAIN fuzz run $target $artifact"
        else
            say "$target FAILED after $((SECONDS - t0)) s, no input saved; output:"
            tail -n 40 "$log"
        fi
        say "  full output: $ARTIFACTS/$target/smoke.log"
        failed+=("$target")
    fi
done

say "total $((SECONDS - start)) s"
if ((${#failed[@]})); then
    die "failed: ${failed[*]}"
fi
