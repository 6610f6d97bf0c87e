#!/usr/bin/env bash
# Two builds side by side on this machine's cores, alternating so that a busy machine slows both
# alike: LeNet-5 on `omp` (one epoch, batch 64 or BATCH) and VGG16 inference on `omp` at batch 1 and 8 beside
# onnxruntime-node on the same threads (bench/cpu/infer_vgg16_cpu.sh's model and images).
#   bench/cpu/compare_cpu.sh OLD_BINARY NEW_BINARY [ROUNDS, default 3]
# VGG16=0 times LeNet-5 alone (more rounds in the same time, for a noisy machine); VARIANTS="omp avx"
# times LeNet-5 on each of them (default omp). THREADS sets omp's threads (default: every core), BATCH
# LeNet-5's batch (default 64); LENET5_DATA where MNIST is (default data/mnist).
# Prints each run and the medians: LeNet-5 wall ms per epoch and test accuracy; VGG16 ms per image.
set -euo pipefail
cd "$(dirname "$0")/../.."
old=${1:?usage: bench/cpu/compare_cpu.sh OLD_BINARY NEW_BINARY [ROUNDS]}; new=${2:?new binary}; rounds=${3:-3}
threads=${THREADS:-$(nproc)}; batch=${BATCH:-64}; W=${LENET5_WORK:-/tmp/lenet5-vgg}; mkdir -p "$W"; vgg=${VGG16:-1}; variants=${VARIANTS:-omp}
if [ "$vgg" = 1 ]; then
    bench/peers/install_onnxruntime.sh
    [ -f "$W/vgg16.onnx" ] || /usr/bin/python3 bench/onnx/make_vgg16_onnx.py vgg16 "$W/vgg16.onnx" --seed 1
    [ -f "$W/x.npy" ] || /usr/bin/python3 -c "import numpy as np, sys; np.save(sys.argv[1], np.random.default_rng(3).uniform(-1, 1, (10, 3, 224, 224)).astype('<f4'))" "$W/x.npy"
fi
echo "machine: $(nproc) cores ($threads threads, batch $batch), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
R=$(mktemp -d)
for round in $(seq "$rounds"); do
    for which in old new; do
        bin=${!which}
        for v in $variants; do
            "$bin" train --variant "$v" --threads "$threads" --batch "$batch" --epochs 1 --json "$R/lenet5_${v}_${which}_$round.json" >/dev/null
        done
        [ "$vgg" = 1 ] || continue
        for b in 1 8; do
            OMP_NUM_THREADS=$threads "$bin" infer --onnx "$W/vgg16.onnx" --input "$W/x.npy" --output "$R/y.npy" \
                --variant omp --threads "$threads" --batch $b --repeats 3 --json "$R/vgg_${which}_b${b}_$round.json" >/dev/null
        done
    done
    [ "$vgg" = 1 ] || continue
    for b in 1 8; do
        node bench/peers/onnxruntime_run.js --model "$W/vgg16.onnx" --input "$W/x.npy" \
            --output "$R/y_ort.npy" --batch $b --threads "$threads" --repeats 3 > "$R/ort_b${b}_$round.json"
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$R" "$rounds" "$vgg" $variants <<'PY'
import json, statistics, sys
R, rounds, vgg, variants = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4:]
def load(name): return json.load(open(f"{R}/{name}"))
def tail_json(name):  # onnxruntime_run.js prints its JSON as the last line
    return json.loads(open(f"{R}/{name}").read().strip().splitlines()[-1])
for v in variants:
    for which in ("old", "new"):
        runs = [load(f"lenet5_{v}_{which}_{r}.json") for r in range(1, rounds + 1)]
        wall = [x["epochs"][0]["wall_ms"] for x in runs]
        print(f"LeNet-5 {v} {which}: wall ms {', '.join('%.0f' % w for w in wall)}; median {statistics.median(wall):.0f}; "
              f"test {100 * runs[0]['final_test_accuracy']:.2f}%")
for b in (1, 8) if vgg else ():
    ort = statistics.median(tail_json(f"ort_b{b}_{r}.json")["ms_per_image"] for r in range(1, rounds + 1))
    line = f"VGG16 batch {b}: onnxruntime {ort:.1f} ms per image"
    for which in ("old", "new"):
        ms = statistics.median(load(f"vgg_{which}_b{b}_{r}.json")["ms_per_image"] for r in range(1, rounds + 1))
        line += f"; {which} {ms:.1f} ({ort / ms:.2f}x onnxruntime)"
    print(line)
PY
