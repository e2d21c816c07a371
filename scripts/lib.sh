# Shared by scripts/test.sh and scripts/quickstart.sh (sourced, not run).

tp_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

tp_log() { printf '== %s\n' "$*" >&2; }

# Install the Debian packages the build and tests need, if missing, plus
# any named as arguments.
tp_install_deps() {
	local pkgs=(cmake make gcc pkg-config libssl-dev libcmocka-dev libnuma-dev python3 iproute2 nftables "$@") missing=() p
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

# tp_build DIR [cmake args...]: configure and build.
tp_build() {
	local dir=$1
	shift
	tp_find_cuda
	cmake -S "$tp_root" -B "$dir" "$@" >"$dir/configure.log" 2>&1 ||
		{ cat "$dir/configure.log"; return 1; }
	grep -E 'tcpx_p2p: CUDA' "$dir/configure.log" >&2 || true
	cmake --build "$dir" -j"$(nproc)"
}
