#!/usr/bin/env bash
# Set up and run every test: installs missing Debian packages, builds with
# warnings as errors, runs CTest; then (unless --quick) the same suite
# under ASan+UBSan and under TSan, and a bounded libFuzzer run of the fuzz
# targets (about 60 s; skipped with a message where clang cannot be had).
# GPU tests skip (exit 77) without a GPU.
# Usage: scripts/test.sh [--quick] [extra ctest args]
set -euo pipefail
source "$(dirname "$0")/lib.sh"

quick=0
if [ "${1:-}" = "--quick" ]; then
	quick=1
	shift
fi
tp_install_deps
jobs=$(nproc)

run_suite() { # name, build dir, cmake args...
	local name=$1 dir=$2
	shift 2
	tp_log "$name: build in $dir"
	mkdir -p "$dir"
	tp_build "$dir" -DTCPX_P2P_WERROR=ON -DTCPX_P2P_TEST_HOOKS=ON "$@"
	tp_log "$name: ctest"
	ctest --test-dir "$dir" --output-on-failure -j"$jobs" --timeout 900 "${ctest_args[@]}"
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
	cmake --build "$dir" -j"$jobs" --target fuzz_frame fuzz_blob fuzz_handshake fuzz_ctl
	for t in frame blob handshake ctl; do
		tp_log "fuzz: $t, 20 s"
		mkdir -p "$dir/corpus/$t"
		if ! "$dir/bin/fuzz_$t" -max_total_time=20 -timeout=10 \
			-artifact_prefix="$dir/crashes/$t-" "$dir/corpus/$t" \
			"$tp_root/tests/fuzz/corpus/$t" >"$dir/fuzz_$t.log" 2>&1; then
			tail -n 40 "$dir/fuzz_$t.log"
			tp_log "fuzz: $t failed; inputs in $dir/crashes"
			return 1
		fi
		grep -E '^Done [0-9]+ runs' "$dir/fuzz_$t.log" >&2 || true
	done
}

ctest_args=("$@")
run_suite release "$tp_root/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo
if [ "$quick" = 0 ]; then
	# Sanitizer builds leave CUDA out: they check the host code, and the
	# CUDA runtime is not instrumented.
	run_suite asan "$tp_root/build-asan" -DCMAKE_BUILD_TYPE=Debug -DTCPX_P2P_CUDA=OFF \
		-DTCPX_P2P_SANITIZE=address,undefined
	TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
		run_suite tsan "$tp_root/build-tsan" -DCMAKE_BUILD_TYPE=Debug -DTCPX_P2P_CUDA=OFF \
		-DTCPX_P2P_SANITIZE=thread
	run_fuzz
fi
tp_log "all test suites passed"
