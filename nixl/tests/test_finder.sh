#!/bin/sh
# nixl.finder: find_nixl.cmake against the installed NIXL ($1) and Abseil
# packages made up here: one without absl::log (Debian 12's), one whose
# libraries are another build than libnixl.so loads; each must be refused
# with the fix named, an absl_DIR given must survive a new NIXL_PREFIX, and
# NIXL's own Abseil must be found.  Exit 0 pass, 1 fail, 77 skip.
set -u
prefix=$1
src=$(cd "$(dirname "$0")/finder" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0

mkdir -p "$work/old" "$work/other"
cat > "$work/old/abslConfig.cmake" <<'EOC'
set(absl_VERSION 20220623)
add_library(absl::base INTERFACE IMPORTED)
EOC
cat > "$work/other/abslConfig.cmake" <<'EOC'
set(absl_VERSION 20990101)
foreach(t log check strings)
  add_library(absl::${t} INTERFACE IMPORTED)
endforeach()
add_library(absl::log_internal_message SHARED IMPORTED)
set_target_properties(absl::log_internal_message PROPERTIES
  IMPORTED_LOCATION_RELEASE /nonexistent/libabsl_log_internal_message.so.2999.0.0
  IMPORTED_SONAME_RELEASE libabsl_log_internal_message.so.2999.0.0)
EOC

# configure DIR ARGS...: the finder's printed decision in DIR/out
configure() {
	d=$1
	shift
	cmake -S "$src" -B "$work/$d" "$@" > "$work/$d.out" 2>&1
}
expect() { # FILE PATTERN WHAT
	if ! grep -q "$2" "$1"; then
		echo "FAIL: $3 (no '$2' in $1):"
		cat "$1"
		fail=1
	fi
}

configure real -DNIXL_PREFIX="$prefix"
if grep -q "TP_NIXL_MISSING=no include" "$work/real.out"; then
	echo "skipped: NIXL not found at '$prefix'"
	exit 77
fi
expect "$work/real.out" "TP_NIXL_FOUND=ON" "NIXL's own Abseil found"

configure old -DNIXL_PREFIX="$prefix" -Dabsl_DIR="$work/old"
expect "$work/old.out" "TP_NIXL_FOUND=OFF" "an Abseil without absl::log refused"
expect "$work/old.out" "has no absl::log" "the reason said"
expect "$work/old.out" "TP_NIXL_FIX=give -Dabsl_DIR" "the fix named"

if readelf -d "$(ls "$prefix"/lib/*/libnixl.so "$prefix"/lib/libnixl.so 2>/dev/null | head -1)" \
	| grep -q libabsl_log_internal_message; then
	configure other -DNIXL_PREFIX="$prefix" -Dabsl_DIR="$work/other"
	expect "$work/other.out" "TP_NIXL_FOUND=OFF" "another Abseil build refused"
	expect "$work/other.out" "is libabsl_log_internal_message.so.2999" "the two named"
else
	echo "another Abseil build: not checked (libnixl.so loads no shared Abseil)"
fi

# a given absl_DIR survives a change of NIXL_PREFIX
cmake -S "$src" -B "$work/old" -DNIXL_PREFIX="$prefix/" > "$work/old2.out" 2>&1
expect "$work/old2.out" "has no absl::log" "absl_DIR kept after a new NIXL_PREFIX"
grep -q "^absl_DIR:[A-Z]*=$work/old\$" "$work/old/CMakeCache.txt" ||
	{ echo "FAIL: absl_DIR cleared"; grep absl_DIR "$work/old/CMakeCache.txt"; fail=1; }

[ $fail = 0 ] && echo "passed"
exit $fail
