#!/usr/bin/env bash
# Set up and run every test: installs missing Debian packages, builds with
# warnings as errors, runs CTest; then (unless --quick) the same suite
# under ASan+UBSan and under TSan, and a bounded libFuzzer run of the fuzz
# targets (20 s each; skipped with a message where clang cannot be had).
# GPU tests skip (exit 77) without a GPU.  A suite that runs no test fails.
# Usage: scripts/test.sh [--quick] [extra ctest args]   (--help: usage)
set -euo pipefail
source "$(dirname "$0")/lib.sh"

usage() {
	cat <<'USAGE'
usage: scripts/test.sh [--quick] [extra ctest args]
Builds and tests the release suite in build/, then (unless --quick) the
ASan+UBSan suite in build-asan/, the TSan suite in build-tsan/ and a 20 s
libFuzzer run per target in build-fuzz/.  Installs missing Debian packages
first.  Each suite is configured with every option it depends on, so a
build/ made by scripts/quickstart.sh gets its tests; a suite that runs no
test fails.  Extra arguments go to every ctest run (e.g. -R unit_).
  --quick     the release suite only
  -h, --help  this text
USAGE
}

# Help is answered before anything is installed or built.
for a in "$@"; do
	case $a in -h|--help) usage; exit 0 ;; esac
done
quick=0
if [ "${1:-}" = "--quick" ]; then
	quick=1
	shift
fi
tp_install_deps
jobs=$(nproc)

run_suite() { # name (a tp_suite_args suite), build dir
	local name=$1 dir=$2 tp_args
	tp_log "$name: build in $dir"
	tp_suite_args "$name"
	tp_build "$dir" "${tp_args[@]}"
	tp_log "$name: ctest"
	tp_ctest "$dir" "${ctest_args[@]}"
}

# tests/fuzz: each target 20 s from its committed seeds plus what earlier
# runs found (build-fuzz/corpus).  A crash fails the run; its input, saved
# in build-fuzz/crashes, belongs in tests/fuzz/corpus/<target>/ with the fix.
run_fuzz() {
	local dir=$tp_root/build-fuzz t
	command -v clang >/dev/null 2>&1 || tp_install_deps clang || true
	if ! command -v clang >/dev/null 2>&1; then
		tp_log "fuzz: clang is not available: fuzz targets skipped"
		return 0
	fi
	tp_log "fuzz: build in $dir"
	mkdir -p "$dir/crashes"
	CC=clang cmake -S "$tp_root" -B "$dir" -DCMAKE_BUILD_TYPE=Debug -DBUILD_TESTING=OFF \
		-DTCPX_P2P_CUDA=OFF -DTCPX_P2P_FUZZ=ON -DTCPX_P2P_SANITIZE=address,undefined \
		>"$dir/configure.log" 2>&1 || { cat "$dir/configure.log"; return 1; }
	cmake --build "$dir" -j"$jobs" --target fuzz_frame fuzz_blob fuzz_handshake fuzz_ctl \
		fuzz_meta
	for t in frame blob handshake ctl meta; do
		tp_log "fuzz: $t, 20 s"
		mkdir -p "$dir/corpus/$t"
		if ! "$dir/bin/fuzz_$t" -max_total_time=20 -timeout=10 \
			-artifact_prefix="$dir/crashes/$t-" "$dir/corpus/$t" \
			"$tp_root/tests/fuzz/corpus/$t" >"$dir/fuzz_$t.log" 2>&1; then
			# The sanitizer's report with its stacks, then how the run ended.
			sed -n '/ERROR: /,/^SUMMARY: /p' "$dir/fuzz_$t.log" | head -n 80
			tail -n 6 "$dir/fuzz_$t.log"
			tp_log "fuzz: $t failed; inputs in $dir/crashes"
			return 1
		fi
		grep -E '^Done [0-9]+ runs' "$dir/fuzz_$t.log" >&2 || true
	done
}

ctest_args=("$@")
run_suite release "$tp_root/build"
if [ "$quick" = 0 ]; then
	# Sanitized code runs several times slower, more so on a loaded
	# machine: a peer (or a handshake) that is merely slow there must not
	# be presumed dead by the production defaults (10 s each).  Tests of
	# liveness and handshake deadlines set their own values.
	export TCPX_P2P_DEAD_AFTER_MS=60000 TCPX_P2P_HANDSHAKE_MS=60000
	run_suite asan "$tp_root/build-asan"
	TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" run_suite tsan "$tp_root/build-tsan"
	unset TCPX_P2P_DEAD_AFTER_MS TCPX_P2P_HANDSHAKE_MS
	run_fuzz
fi
tp_log "all test suites passed"
