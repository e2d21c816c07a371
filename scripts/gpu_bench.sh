#!/usr/bin/env bash
# The GPU benchmark batch run after scripts/gpu_ci.sh on a GPU machine:
# verified tcpx_perf loopback over the emulator for every unpack variant,
# host-memory channel scaling, and unpack_bench.  Usage (BUILD = build dir):
#   BUILD=build-gpu scripts/gpu_bench.sh
set -euo pipefail
build=${BUILD:-build-gpu}
perf=$build/bin/tcpx_perf
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
gpus=0,0
[ "$ngpu" -ge 2 ] && gpus=0,1
status=0

run() {
	echo "\$ $*"
	"$@" || { echo "FAILED: $*"; status=1; }
}

for unpack in kernel d2d host; do
	for size in 64M 256M; do
		run "$perf" loopback --mem cuda --gpu "$gpus" --unpack "$unpack" --size "$size" \
			-n 5 -w 2 --verify -q
	done
done
# Host buffers: with a GPU present the emulator would bounce even host
# receives through device memory (as TCPX would); measure the host path.
for ch in 1 2 4; do
	TCPX_EMU_BOUNCE=off run "$perf" loopback --mem host --channels "$ch" --size 64M -n 20 -w 3 -q
done
run "$perf" loopback --mem cuda --gpu "$gpus" -b 512K -e 256M -f 4 -n 10 -w 2 -q
for ch in 4 8; do
	run "$perf" loopback --mem cuda --gpu "$gpus" --channels "$ch" --size 256M -n 10 -w 2 -q
done
# TCPX's progress model (strict, the default) against the lenient one, in
# the same run: the library must keep the plugin fed (target: strict >=
# 0.9x eager).
for rep in 1 2 3; do
	for mode in strict eager; do
		for ch in 2 4; do
			for size in 64M 256M; do
				echo "## progress=$mode rep=$rep"
				TCPX_EMU_PROGRESS=$mode run "$perf" loopback --mem cuda --gpu "$gpus" \
					--channels "$ch" --size "$size" -n 10 -w 2 -q
				TCPX_EMU_PROGRESS=$mode TCPX_EMU_BOUNCE=off run "$perf" loopback \
					--mem host --channels "$ch" --size "$size" -n 10 -w 2 -q
			done
		done
	done
done
if [ -x "$build/bin/unpack_bench" ]; then
	run "$build/bin/unpack_bench"
fi
exit $status
