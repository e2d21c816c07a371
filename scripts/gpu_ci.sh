#!/usr/bin/env bash
# Build the project on a GPU machine that has nvcc and cmake but no cmocka
# and no network, run the GPU-labelled tests, then any extra commands.
#
#   scripts/gpu_ci.sh ['extra command' ...]
#
# Expects the cmocka .debs in ./.deps/ (fetch them on a networked machine:
#   mkdir -p .deps && cd .deps && apt-get download libcmocka0 libcmocka-dev
# and, for an image without pkg-config, pkgconf pkgconf-bin libpkgconf3).
# Extra commands run from the repository root with $BUILD set to the build
# directory, e.g. '$BUILD/bin/unpack_bench'.  Logs go to $BUILD/gpu_ci/ and,
# when $OUT is set, to $OUT.  The GPU tests include the Python package's
# (python.gpu, with PyTorch); none found (a build directory configured
# without tests) is a failure, not a pass.  Environment: BUILD (default build-gpu),
# TCPX_P2P_PYTHON (the python3 to build the package for; default: probed,
# see python/CMakeLists.txt),
# GPU_CI_CTEST=0 (build and run the extra commands only),
# TCPX_P2P_WERROR (default OFF: a newer host compiler's new warnings should
# not hide GPU results), CUDA_ARCH (default 90).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
deps=$repo/.deps
root=$deps/root
export BUILD=${BUILD:-$repo/build-gpu}
logs=$BUILD/gpu_ci
jobs=$(nproc)
summary=()
status=0

mkdir -p "$logs"

note() { summary+=("$1"); }

# Run a step, its output to the terminal and to a log; record pass/fail.
step() {
	local name=$1 log=$2
	shift 2
	echo "==== $name"
	if "$@" 2>&1 | tee -a "$log"; then
		note "PASS  $name"
		return 0
	fi
	note "FAIL  $name (log: $(basename "$log"))"
	status=1
	return 1
}

finish() {
	if [[ -n "${OUT:-}" ]]; then
		cp -f "$logs"/*.log "$OUT"/ 2>/dev/null || true
	fi
	echo
	echo "==== gpu_ci summary ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || echo 'no nvidia-smi'))"
	printf '%s\n' "${summary[@]}"
	echo "==== gpu_ci: $([[ $status == 0 ]] && echo OK || echo FAILED)"
}
trap finish EXIT

# cmocka (and pkg-config if the image lacks it) from the carried .debs.
shopt -s nullglob
debs=("$deps"/*.deb)
if ((${#debs[@]})); then
	rm -rf "$root"
	mkdir -p "$root"
	for d in "${debs[@]}"; do
		dpkg -x "$d" "$root"
	done
	# The .pc files name /usr (as prefix=, or in -I/-L flags, as Debian's
	# cmocka.pc does): point them at the extracted tree.
	for pc in "$root"/usr/lib/*/pkgconfig/*.pc "$root"/usr/lib/pkgconfig/*.pc \
		"$root"/usr/share/pkgconfig/*.pc; do
		sed -i -e "s|^prefix=/usr|prefix=$root/usr|" -e "s|-L/usr/|-L$root/usr/|g" \
			-e "s|-I/usr/|-I$root/usr/|g" "$pc"
	done
	note "deps  extracted ${#debs[@]} .deb(s) into .deps/root"
else
	note "deps  none in .deps/ (relying on system cmocka)"
fi
libdirs=$(find "$root" -name 'lib*.so*' -printf '%h\n' 2>/dev/null | sort -u | paste -sd:)
export LD_LIBRARY_PATH=${libdirs:+$libdirs:}${LD_LIBRARY_PATH:-}
pcdirs=$(find "$root" -type d -name pkgconfig 2>/dev/null | paste -sd:)
export PKG_CONFIG_PATH=${pcdirs:+$pcdirs:}${PKG_CONFIG_PATH:-}
cmake_args=(-DCMAKE_PREFIX_PATH="$root/usr" -DTCPX_P2P_CUDA=ON
	-DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" -DTCPX_P2P_WERROR="${TCPX_P2P_WERROR:-OFF}"
	-DCMAKE_BUILD_TYPE=RelWithDebInfo -DTCPX_P2P_TEST_HOOKS=ON -DBUILD_TESTING=ON)
if [[ -n ${TCPX_P2P_PYTHON:-} ]]; then
	cmake_args+=(-DTCPX_P2P_PYTHON="$TCPX_P2P_PYTHON")
fi
if ! command -v pkg-config >/dev/null && [[ -x $root/usr/bin/pkgconf ]]; then
	cmake_args+=(-DPKG_CONFIG_EXECUTABLE="$root/usr/bin/pkgconf")
fi
if [[ -x /usr/local/cuda/bin/nvcc ]] && ! command -v nvcc >/dev/null; then
	export PATH=/usr/local/cuda/bin:$PATH
fi

step configure "$logs/configure.log" cmake -S "$repo" -B "$BUILD" "${cmake_args[@]}" || exit 1

# Other parts of the tree may be mid-edit: if the whole build fails, still
# build what the GPU tests and the unpack benchmark need, one target at a
# time, so that one that fails does not keep the others from being built.
gpu_targets=(test_device test_unpack_kernel test_copy_kernel unpack_bench tp_python)
if ! step "build (all)" "$logs/build.log" cmake --build "$BUILD" -j "$jobs"; then
	built=0
	for t in "${gpu_targets[@]}"; do
		step "build $t" "$logs/build.log" cmake --build "$BUILD" -j "$jobs" --target "$t" &&
			built=$((built + 1))
	done
	((built)) || exit 1
fi

if [[ ${GPU_CI_CTEST:-1} != 0 ]]; then
	step "ctest -L gpu" "$logs/ctest.log" \
		ctest --test-dir "$BUILD" -L gpu --no-tests=error --output-on-failure --timeout 600 ||
		true
	grep -E '^ *[0-9]+/[0-9]+ Test' "$logs/ctest.log" | sed 's/^ */      /' >"$logs/tests.txt" || true
	while IFS= read -r line; do note "$line"; done <"$logs/tests.txt"
fi

n=0
for cmd in "$@"; do
	n=$((n + 1))
	step "extra $n: $cmd" "$logs/extra.log" bash -c "$cmd" || true
done
exit "$status"
