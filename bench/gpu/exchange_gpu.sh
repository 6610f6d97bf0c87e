#!/usr/bin/env bash
# The exchange on a machine with two GPUs (not yet run: no such machine could take this branch's
# build in the session that wrote it). From a bundle (bench/gpu/make_gpu_bundle.sh):
#   bench/gpu/exchange_gpu.sh BUNDLE_DIR
# registers NVIDIA's OpenCL, times the pinned transfers of each bucket (CNN, LeNet-5), and trains
# the CNN (batch 1024) and LeNet-5 (batch 64) for 3 epochs on one GPU, on two with measured
# shares, and on two with an even split.
source "$(dirname "$(realpath "$0")")/bundle_env.sh" "${1:?usage: bench/gpu/exchange_gpu.sh BUNDLE_DIR}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
./lenet5 devices
read -r a b < <(./lenet5 devices | grep -i nvidia | cut -d: -f1 | head -2 | paste -sd' ')
echo "GPUs: $a $b"
./lenet5_exchange_bench pinned --model cnn --device "$a"
./lenet5_exchange_bench pinned --model lenet5 --device "$a"
for m in "--model cnn --batch 1024" "--batch 64"; do
    for w in "--device $a" "--workers $a,$b" "--workers $a@1,$b@1"; do
        echo "== train $m --epochs 3 $w"
        ./lenet5 train $m --epochs 3 --data mnist $w 2>&1 | grep -v '^\s*$'
    done
done
