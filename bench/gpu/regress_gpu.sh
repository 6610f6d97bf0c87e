#!/usr/bin/env bash
# Two builds alternating on one GPU, to tell a regression from the machine's noise: LeNet-5 on
# gpu-local at batch 64 and the CNN at batch 1024, 3 epochs each, and the MLP (its recipe: one
# epoch, one sample a step), in ROUNDS rounds (default 2). From a bundle
# (bench/gpu/make_gpu_bundle.sh) and an older build's binary made the same way:
#   bench/gpu/regress_gpu.sh BUNDLE_DIR OLD_BINARY [ROUNDS]
# Prints, per build and run, the median wall ms of epochs 2-3 (the MLP's one epoch) and the final
# test accuracy. Then, per build: the time to 99.0% with models/lenet5-fast.net (the training seconds,
# as bench/time_to_accuracy.sh reports them, for each of SEEDS, default 1-5, and their median), and
# VGG16's inference at batch 1 on gpu-local (ms per image, the median of 5 passes; the model made
# here by bench/onnx/make_vgg16_onnx.py, seed 1; VGG16=0 leaves it out).
bundle=${1:?usage: bench/gpu/regress_gpu.sh BUNDLE_DIR OLD_BINARY}; old=$(realpath "${2:?old binary}")
bench=$(dirname "$(realpath "$0")")
root=$(dirname "$(dirname "$bench")")
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
for which in old new; do
    bin=./lenet5; [ $which = old ] && bin=$old
    times=()
    for seed in ${SEEDS:-1 2 3 4 5}; do
        "$bin" train --model "$root/models/lenet5-fast.net" --variant gpu-local --device "$dev" --data mnist --seed "$seed" \
            --target-accuracy 99% --eval-every 23 --json /tmp/regress_tta.json >/dev/null || exit 1
        times+=("$(python3 -c "import json; t = json.load(open('/tmp/regress_tta.json'))['time_to_accuracy']
print('%.4f' % t['train_seconds'] if t.get('reached') else 'not-reached')")")
    done
    python3 -c "import statistics, sys; v = sys.argv[2:]; r = [float(x) for x in v if x != 'not-reached']
print('%s time to 99.0%%, seeds %s: %s s; median %.4f s, %d of %d reached' % (sys.argv[1], '${SEEDS:-1 2 3 4 5}',
      ' '.join(v), statistics.median(r) if r else float('nan'), len(r), len(v)))" "$which" "${times[@]}"
done
[ "${VGG16:-1}" = 1 ] || exit 0
W=/tmp/lenet5-gpu; mkdir -p $W
[ -f $W/vgg16.onnx ] || python3 "$root/bench/onnx/make_vgg16_onnx.py" vgg16 $W/vgg16.onnx --seed 1 >/dev/null || exit 1
python3 -c "import numpy as np; np.save('$W/x1.npy', np.random.default_rng(3).uniform(-1, 1, (4, 3, 224, 224)).astype('<f4'))"
for which in old new; do
    bin=./lenet5; [ $which = old ] && bin=$old
    "$bin" infer --onnx $W/vgg16.onnx --input $W/x1.npy --variant gpu-local --device "$dev" --batch 1 --repeats 5 |
        sed "s/^/$which VGG16 b1: /"
done
