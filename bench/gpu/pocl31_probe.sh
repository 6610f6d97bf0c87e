#!/usr/bin/env bash
# Debian 12's PoCL 3.1 (LLVM 15) on the lent GPU machine's CPU, which has AVX-512 (the machine's own
# PoCL is newer): the MLP's batch-1 training and `lenet5 check` through it, under each of PoCL's
# work-group methods and with each kernel folder of PROBE_DIR/kernels/* (as --kernels takes them).
#   bench/gpu/pocl31_probe.sh BUNDLE PROBE_DIR
# BUNDLE: bench/gpu/make_gpu_bundle.sh's folder. PROBE_DIR: pocl31.tar.xz (Debian 12's libpocl2,
# its kernel library for avx512, clang-15, libLLVM-15, libclang-cpp15 and what they load, in deplibs/,
# as bench/gpu/make_pocl31_bundle.sh packs them), mnist/ (a small MNIST), kernels/NAME/ (kernel folders,
# optional), repro (bench/gpu/pocl31_repro/repro.cpp built, optional), bundle.tar.xz (BUNDLE packed, unpacked into BUNDLE when that has no lenet5: it saves carry room).
set -uo pipefail
source "$(dirname "$(realpath "$0")")/pocl31_env.sh" "$@"
"$bundle/lenet5" devices
train() {  # method kernels-folder [env...]
    local method=$1 kernels=$2; shift 2
    local args=(train --model mlp --variant gpu-local --epochs 1 --data "$probe/mnist" --train-limit 6000 --test-limit 1000)
    [[ -n $kernels ]] && args+=(--kernels "$kernels")
    local acc
    acc=$(env POCL_CACHE_DIR="/tmp/pocl-cache-$method" POCL_WORK_GROUP_METHOD="$method" "$@" timeout 300 \
          "$bundle/lenet5" "${args[@]}" 2>&1 | awk '$1 == "1" {print $NF} /error/')
    echo "$method ${kernels:-embedded} $* -> $acc"
}
export OMP_NUM_THREADS=4 POCL_MAX_PTHREAD_COUNT=4
# The embedded kernels: persistent steps in one group (the CPU's default) and in two, and a launch a step.
for method in loopvec loops; do
    for groups in "" 2 0; do train "$method" "" LENET5_PERSISTENT=$groups; done
done
for k in "$probe"/kernels/*/; do [[ -d $k ]] && train loopvec "${k%/}"; done
# Smaller kernels of the same shape (bench/gpu/pocl31_repro), built here into PROBE_DIR/repro.
if [[ -x $probe/repro ]]; then
    for method in default loopvec; do
        [[ $method == default ]] && e=() || e=(POCL_WORK_GROUP_METHOD=$method)
        echo "== pocl31_repro, $method"
        env "${e[@]}" POCL_CACHE_DIR=/tmp/pocl-cache-repro-$method "$probe/repro" "$(dirname "$0")/pocl31_repro/repro.cl"
    done
fi
for v in gpu gpu-constant gpu-local; do
    POCL_CACHE_DIR=/tmp/pocl-cache-check timeout 300 "$bundle/lenet5" check --model mlp --variant $v --batch 1 --batches 2 \
        --data "$probe/mnist" 2>&1 | tail -1
done
