#!/usr/bin/env bash
# Shopify's Toxiproxy, the fault-injecting TCP proxy of the fault tests and the soak
# (tests/common/proxy.rs drives it over its HTTP API). Built from its Go module with
# `go install` at a pinned version and cached beside the Kafka jars; nothing else is downloaded.
#
#   scripts/toxiproxy.sh fetch      build toxiproxy-server once (idempotent); print its path
#   scripts/toxiproxy.sh run PORT   run it with its API on 127.0.0.1:PORT until SIGTERM
#
# Environment:
#   STRAIT_CACHE                 cache root (default $HOME/.cache/strait)
#   STRAIT_TOXIPROXY_WATCH_PID   `run`: stop the server once this process is gone
set -euo pipefail

TOXIPROXY_VERSION=2.12.0
DIR="${STRAIT_CACHE:-$HOME/.cache/strait}/toxiproxy-$TOXIPROXY_VERSION"
BIN="$DIR/toxiproxy-server"

die() { echo "toxiproxy.sh: $*" >&2; exit 1; }

fetch() {
    mkdir -p "$DIR"
    # Several test binaries may fetch at once: serialise on a lock file.
    exec 9>"$DIR/.lock"
    flock 9
    if [[ ! -x "$BIN" ]]; then
        command -v go >/dev/null || die "go is needed to build toxiproxy-server"
        echo "toxiproxy.sh: building toxiproxy-server $TOXIPROXY_VERSION..." >&2
        local tmp
        tmp="$(mktemp -d)"
        GOBIN="$tmp" GOFLAGS=-buildvcs=false \
            go install "github.com/Shopify/toxiproxy/v2/cmd/server@v$TOXIPROXY_VERSION" >&2 \
            || { rm -rf "$tmp"; die "go install failed"; }
        mv "$tmp/server" "$BIN"
        rm -rf "$tmp"
    fi
    flock -u 9
    exec 9>&-
    echo "$BIN"
}

alive() { [[ -e "/proc/$1" ]] && [[ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]]; }

run() {
    [[ "${1:-}" =~ ^[0-9]+$ ]] || die "usage: run PORT"
    fetch >/dev/null
    "$BIN" -host 127.0.0.1 -port "$1" >/dev/null 2>&1 </dev/null &
    local pid=$! watch="${STRAIT_TOXIPROXY_WATCH_PID:-}"
    trap 'kill -TERM "$pid" 2>/dev/null; wait "$pid"; exit 0' TERM INT
    while alive "$pid"; do
        if [[ -n "$watch" ]] && ! alive "$watch"; then
            kill -TERM "$pid" 2>/dev/null || true
            break
        fi
        sleep 1 &
        wait $! || true
    done
    wait "$pid" || true
}

cmd="${1:-}"
[[ $# -gt 0 ]] && shift
case "$cmd" in
    fetch) fetch ;;
    run) run "$@" ;;
    *) die "usage: toxiproxy.sh fetch|run PORT" ;;
esac
