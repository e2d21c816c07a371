#!/usr/bin/env bash
# Run scripts/test.sh while busy loops keep every core loaded, the way CI's
# 2-core machine is loaded when other jobs share it: a suite that passes
# only on an idle machine fails here.  The loops run at the suite's own
# priority and end with it (they are killed on exit, whatever happens).
# Usage: scripts/test_loaded.sh [--per-core N] [test.sh args]   (--help: usage)
set -euo pipefail

usage() {
	cat <<'USAGE'
usage: scripts/test_loaded.sh [--per-core N] [test.sh args]
Starts N busy loops per CPU (default 2), runs scripts/test.sh with the
remaining arguments (e.g. --quick for the release suite only), stops the
loops and exits with test.sh's status.
  --per-core N  busy loops per CPU (default 2)
  -h, --help    this text
USAGE
}

per_core=2
case ${1:-} in
-h | --help) usage; exit 0 ;;
--per-core)
	per_core=${2:?--per-core needs a number}
	shift 2
	;;
esac
case $per_core in '' | *[!0-9]*) echo "test_loaded: --per-core takes a number" >&2; exit 2 ;; esac
pids=()
stop() { [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null || true; }
trap stop EXIT
n=$(($(nproc) * per_core))
for _ in $(seq "$n"); do
	bash -c 'while :; do :; done' &
	pids+=($!)
done
echo "== test_loaded: $n busy loops on $(nproc) CPUs" >&2
"$(dirname "$0")/test.sh" "$@"
