#!/usr/bin/env bash
# Two builds alternating on one GPU, to tell a regression from the machine's noise: LeNet-5 on
# gpu-local at batch 64 and the CNN at batch 1024, 3 epochs each, and the MLP (its recipe: one
# epoch, one sample a step), in ROUNDS rounds (default 2). From a bundle
# (bench/gpu/make_gpu_bundle.sh) and an older build's binary made the same way:
#   bench/gpu/regress_gpu.sh BUNDLE_DIR OLD_BINARY [ROUNDS]
# Prints, per build and run, the median wall ms of epochs 2-3 (the MLP's one epoch) and the final
# test accuracy.
bundle=${1:?usage: bench/gpu/regress_gpu.sh BUNDLE_DIR OLD_BINARY}; old=$(realpath "${2:?old binary}")
bench=$(dirname "$(realpath "$0")")
source "$bench/bundle_env.sh" "$bundle"
dev=$("$bench/gpu_device.sh" ./lenet5) || exit 1
echo "device $dev: $(./lenet5 devices | grep "^$dev:")"
for round in $(seq "${3:-2}"); do
    for which in old new; do
        bin=./lenet5; [ $which = old ] && bin=$old
        for m in "--batch 64 --epochs 3" "--model cnn --batch 1024 --epochs 3" "--model mlp"; do
            "$bin" train $m --variant gpu-local --device "$dev" --data mnist --json /tmp/regress.json >/dev/null ||
                exit 1
            python3 -c "import json, statistics, sys
r = json.load(open('/tmp/regress.json'))
print('%s %-26s %.1f ms per epoch, %.2f%%' % (sys.argv[1], sys.argv[2],
      statistics.median(e['wall_ms'] for e in r['epochs'][1:] or r['epochs']), 100 * r['final_test_accuracy']))" "$which" "$m"
        done
    done
done
