#!/usr/bin/env bash
# LeNet-5's speed on a GPU beside PyTorch, and an older build beside it, from a bundle
# (bench/gpu/make_gpu_bundle.sh) and an older build's binary made the same way:
#   bench/gpu/lenet5_gpu_speed.sh BUNDLE_DIR OLD_BINARY OUT_DIR
# Each build tunes its own work-group sizes (lenet5 tune, batch 64 and 256, its own cache), then
# bench/epoch_bench.py times the three OpenCL variants (the old build: gpu-local) over 3 rounds of
# 3 epochs at batch 64 and 256, PyTorch with and without CUDA graphs in each round; then the MLP
# (batch 1) twice each, alternating, and 10 epochs of LeNet-5 at batch 64 for the accuracy.
# Tables and JSON go to OUT_DIR.
bundle=${1:?usage: bench/gpu/lenet5_gpu_speed.sh BUNDLE_DIR OLD_BINARY OUT_DIR}
old=$(realpath "${2:?old binary}")
out=$(realpath -m "${3:?output folder}")
bench=$(dirname "$(realpath "$0")")
source "$bench/bundle_env.sh" "$bundle"
mkdir -p "$out"
dev=$("$bench/gpu_device.sh" ./lenet5) || exit 1
echo "device $dev: $(./lenet5 devices | grep "^$dev:")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
cache=$(mktemp -d)
for which in old new; do
    bin=./lenet5; [ $which = old ] && bin=$old
    for batch in 64 256; do
        echo "== lenet5 tune, $which build, batch $batch"
        LENET5_TUNING=$cache/$which.tsv "$bin" tune --device "$dev" --variant gpu,gpu-constant,gpu-local --batch $batch |
            grep -vE '^lenet5 tune|^cached in'
    done
done
for batch in 64 256; do
    echo "== batch $batch, this build beside PyTorch"
    LENET5_TUNING=$cache/new.tsv python3 "$bench/../epoch_bench.py" --binary ./lenet5 --data mnist --devices "$dev" \
        --variants gpu,gpu-constant,gpu-local --peer cuda --python python3 --epochs 3 --repeats 3 --batch $batch \
        --out "$out/new_b$batch"
    echo "== batch $batch, the old build"
    LENET5_TUNING=$cache/old.tsv python3 "$bench/../epoch_bench.py" --binary "$old" --data mnist --devices "$dev" \
        --variants gpu-local --peer none --epochs 3 --repeats 3 --batch $batch --out "$out/old_b$batch" | tail -n 5
done
for round in 1 2; do
    for which in old new; do
        bin=./lenet5; [ $which = old ] && bin=$old
        echo "== MLP, $which build, round $round"
        "$bin" train --model mlp --variant gpu-local --device "$dev" --epochs 2 --data mnist | tail -n 2
    done
done
echo "== LeNet-5, 10 epochs at batch 64, tuned"
LENET5_TUNING=$cache/new.tsv ./lenet5 train --variant gpu-local --device "$dev" --epochs 10 --batch 64 --data mnist \
    --json "$out/acc10_b64.json" | tail -n 11
rm -rf "$cache"
