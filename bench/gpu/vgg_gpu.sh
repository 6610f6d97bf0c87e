#!/usr/bin/env bash
# The VGG-like 3x3 model (models/vgg.net) at batch 256 on a GPU, in one command: gpu-local with each
# convolution algorithm of the batch-level engine (own, direct, im2col, winograd), 3 runs of 2 epochs
# (the second epoch's wall time: the first also compiles and plans), then PyTorch with CUDA graphs
# and eager on the same recipe (3 repeats of 2 epochs); medians, and the ratios to winograd.
#   bench/gpu/vgg_gpu.sh [LENET5_BINARY [MNIST_DIR]]   (defaults build/lenet5, data/mnist)
# Environment: LENET5_DEVICE, else the GPU bench/gpu/gpu_device.sh finds. Needs python3 with PyTorch +
# CUDA. NVIDIA's OpenCL must be registered (/etc/OpenCL/vendors/nvidia.icd).
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build/lenet5}; M=${2:-data/mnist}
dev=$(bench/gpu/gpu_device.sh "$B") || exit 1
O=$(mktemp -d); trap 'rm -rf "$O"' EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; "$B" --version | head -1; "$B" devices | sed -n "$((dev + 1))p"
for a in own direct im2col winograd; do
    for r in 1 2 3; do
        "$B" train --model vgg --variant gpu-local --device "$dev" --batch 256 --epochs 2 --conv-algo $a --data "$M" \
            --json "$O/$a.$r.json" >/dev/null 2>"$O/err" || { echo "$a: $(cat "$O/err")"; continue; }
    done
done
for mode in --cuda-graphs ""; do
    python3 bench/peers/pytorch_models.py --model vgg --device cuda $mode --batch 256 --epochs 2 --repeats 3 \
        --data "$M" >"$O/torch${mode:+_graphs}.jsonl" 2>"$O/err" || echo "PyTorch $mode: $(tail -1 "$O/err")"
done
python3 - "$O" <<'PY'
import glob, json, statistics, sys
O = sys.argv[1]
ours = {}
for a in ("own", "direct", "im2col", "winograd"):
    runs = [json.load(open(f)) for f in sorted(glob.glob(f"{O}/{a}.*.json"))]
    if runs:
        ours[a] = statistics.median(r["epochs"][1]["wall_ms"] / 1000 for r in runs)
        print(f"lenet5 gpu-local --conv-algo {a:<8} {ours[a]:.4f} s per epoch (second epoch, median of {len(runs)}; "
              f"runs {', '.join('%.4f' % (r['epochs'][1]['wall_ms'] / 1000) for r in runs)}), "
              f"loss {runs[0]['epochs'][1]['train_loss']:.4f}, test {100 * runs[0]['final_test_accuracy']:.2f}%")
for name in ("torch_graphs", "torch"):
    try:
        lines = [json.loads(l) for l in open(f"{O}/{name}.jsonl") if l.strip()]
    except OSError:
        continue
    second = [l["seconds"] for l in lines if l.get("epoch") == 2]
    if second:
        t = statistics.median(second)
        print(f"PyTorch {'CUDA graphs' if name == 'torch_graphs' else 'eager':<11} {t:.4f} s per epoch (second epoch, median of "
              f"{len(second)}), test {100 * lines[-1]['final_test_accuracy']:.2f}%"
              + (f"; winograd is {t / ours['winograd']:.2f}x faster" if "winograd" in ours else ""))
if "winograd" in ours:
    for a in ("own", "direct", "im2col"):
        if a in ours:
            print(f"winograd against {a}: {ours[a] / ours['winograd']:.2f}x faster")
PY
