#!/usr/bin/env bash
# Set up and run every test: installs missing Debian packages, builds with
# warnings as errors, runs CTest; then (unless --quick) the same suite
# under ASan+UBSan and under TSan.  GPU tests skip (exit 77) without a GPU.
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
fi
tp_log "all test suites passed"
