#!/usr/bin/env bash
# Prints the OpenCL device index the GPU benchmarks run on: $LENET5_DEVICE when it is set, else the
# first GPU that `lenet5 devices` lists (the first NVIDIA one where there is one: the peers run on
# CUDA). The platforms' order varies between machines (PoCL first on some, NVIDIA on others), so
# the index is looked up by the device's type and name, never assumed.
#   bench/gpu/gpu_device.sh [LENET5_BINARY]   (default build/lenet5)
# With no GPU listed: one line on stderr and exit status 1.
set -uo pipefail
if [ -n "${LENET5_DEVICE:-}" ]; then echo "$LENET5_DEVICE"; exit 0; fi
B=${1:-build/lenet5}
[ -x "$B" ] || { echo "gpu_device.sh: error: $B is not an executable (build lenet5, or pass its path)" >&2; exit 1; }
list=$("$B" devices) || exit 1  # lenet5 said why, in one line
# A device's line: "INDEX: PLATFORM / NAME | TYPE | ...".
gpus=$(awk -F' [|] ' '$2 == "GPU"' <<<"$list")
line=$(grep -m1 -i nvidia <<<"$gpus" || head -n1 <<<"$gpus")
if [ -z "$line" ]; then
    listed=$(awk -F' [|] ' 'NF > 1 {printf "%s%s (%s)", sep, $1, $2; sep = ", "}' <<<"$list")
    echo "gpu_device.sh: error: '$B devices' lists no GPU (${listed:-no OpenCL device}); register NVIDIA's OpenCL" \
         "(/etc/OpenCL/vendors/nvidia.icd) or set LENET5_DEVICE" >&2
    exit 1
fi
echo "${line%%:*}"
