# Shared by scripts/test.sh, scripts/quickstart.sh and scripts/chunk_cost.sh
# (sourced, not run).

tp_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

tp_log() { printf '== %s\n' "$*" >&2; }

# Install the Debian packages the build and tests need, if missing, plus
# any named as arguments.  The python3-* ones build and test the Python
# package (python/) with Debian's /usr/bin/python3.
tp_install_deps() {
	local pkgs=(cmake make gcc pkg-config libssl-dev libcmocka-dev libnuma-dev python3 iproute2 nftables
		python3-dev python3-setuptools python3-pip python3-pytest python3-numpy "$@") missing=() p
	for p in "${pkgs[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
			missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	tp_log "installing ${missing[*]}"
	local sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

# CMake finds CUDA through nvcc; point it at the standard prefix when nvcc
# is not on PATH (CI's environment may not have it).
tp_find_cuda() {
	if ! command -v nvcc >/dev/null 2>&1 && [ -z "${CUDACXX:-}" ]; then
		local d
		for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do
			if [ -x "$d/nvcc" ]; then
				export CUDACXX="$d/nvcc"
				break
			fi
		done
	fi
}

# tp_configure DIR [cmake args...]: configure only (log in DIR/configure.log).
tp_configure() {
	local dir=$1
	shift
	mkdir -p "$dir"
	tp_find_cuda
	cmake -S "$tp_root" -B "$dir" "$@" >"$dir/configure.log" 2>&1 ||
		{ cat "$dir/configure.log"; return 1; }
	grep -E 'tcpx_p2p: CUDA' "$dir/configure.log" >&2 || true
}

# tp_build DIR [cmake args...]: configure and build.
tp_build() {
	tp_configure "$@"
	cmake --build "$1" -j"$(nproc)"
}

# tp_suite_args NAME: set the array tp_args to the cmake options of build
# NAME (quickstart, release, asan, tsan).  A build directory keeps the
# options of its last configure in CMakeCache.txt, and the scripts share
# build/: so every suite names each option it depends on, or a build/ made
# by quickstart (BUILD_TESTING=OFF) would run the release suite with no
# tests, and one left with a sanitizer or CUDA off would test the wrong
# library.  Quickstart names only what it changes, to rebuild nothing when
# it follows a test run.
tp_suite_args() {
	local suite=(-DBUILD_TESTING=ON -DTCPX_P2P_WERROR=ON -DTCPX_P2P_TEST_HOOKS=ON
		-DTCPX_P2P_FUZZ=OFF)
	case $1 in
	quickstart) tp_args=(-DBUILD_TESTING=OFF) ;;
	release) tp_args=("${suite[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTCPX_P2P_CUDA=AUTO
		-DTCPX_P2P_SANITIZE=) ;;
	# Sanitizer builds leave CUDA out: they check the host code, and the
	# CUDA runtime is not instrumented.
	asan) tp_args=("${suite[@]}" -DCMAKE_BUILD_TYPE=Debug -DTCPX_P2P_CUDA=OFF
		-DTCPX_P2P_SANITIZE=address,undefined) ;;
	tsan) tp_args=("${suite[@]}" -DCMAKE_BUILD_TYPE=Debug -DTCPX_P2P_CUDA=OFF
		-DTCPX_P2P_SANITIZE=thread) ;;
	*) tp_log "tp_suite_args: unknown suite $1"; return 1 ;;
	esac
}

# tp_ctest DIR [ctest args...]: run a suite's tests.  A suite that runs no
# test fails: "No tests were found" once passed silently for a build/ whose
# cache had BUILD_TESTING off.
tp_ctest() {
	local dir=$1
	shift
	ctest --test-dir "$dir" --no-tests=error --output-on-failure -j"$(nproc)" --timeout 900 "$@"
}
