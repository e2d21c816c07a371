#!/usr/bin/env bash
# Set up, build, and run a verified host-memory transfer benchmark over the
# bundled emulator plugin (both peers in this process, on loopback).
# Usage: scripts/quickstart.sh [tcpx_perf loopback options]
#        (default: --mem host --size 256M --iters 5 --verify)
set -euo pipefail
source "$(dirname "$0")/lib.sh"

tp_install_deps
build="$tp_root/build"
tp_suite_args quickstart
tp_build "$build" "${tp_args[@]}"
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--mem host --size 256M --iters 5 --verify)
tp_log "tcpx_perf loopback ${args[*]}"
exec "$build/bin/tcpx_perf" loopback "${args[@]}"
