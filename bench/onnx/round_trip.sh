#!/usr/bin/env bash
# Export, then infer, on every variant (issue 22's round trip), on the whole MNIST test set:
#   bench/onnx/round_trip.sh prepare DIR [BINARY]
#       (where node and onnxruntime-node are: bench/peers/install_onnxruntime.sh) trains lenet5, mlp and
#       cnn one epoch of 6,000 images on omp, saves and exports each, copies the PyTorch CNN of the tests
#       (tests/data/onnx/mnist_cnn.onnx), and writes onnxruntime's outputs on the 10,000 test images and
#       `lenet5 eval`'s accuracy of each checkpoint into DIR (79 MB, 77 of them the CNN's checkpoint and ONNX).
#   bench/onnx/round_trip.sh check DIR [BINARY] [VARIANTS] [DEVICE]
#       runs `lenet5 infer --onnx` on each file and `--model` on each checkpoint, on each variant
#       (default: cpu avx omp gpu gpu-constant gpu-local; DEVICE: an OpenCL index, default: the GPU
#       bench/gpu/gpu_device.sh finds, else infer's own),
#       and prints per model and variant the largest relative error per output vector against
#       onnxruntime, whether every top-1 class is onnxruntime's, and the top-1 accuracy beside eval's.
#       Exit 1 if any error reaches 1e-5 or any prediction or accuracy differs.
# Needs /usr/bin/python3 (or python3) with numpy, and MNIST in $LENET5_DATA or data/mnist.
set -euo pipefail
cd "$(dirname "$0")/../.."
cmd=${1:?usage: bench/onnx/round_trip.sh prepare|check DIR [BINARY] [VARIANTS] [DEVICE]}
dir=${2:?usage: bench/onnx/round_trip.sh prepare|check DIR [BINARY] [VARIANTS] [DEVICE]}
bin=${3:-build/lenet5}
data=${LENET5_DATA:-data/mnist}
py=/usr/bin/python3
$py -c "import numpy" 2>/dev/null || py=python3
mkdir -p "$dir"

# The test images as infer takes them: float32 .npy, N x 1 x 28 x 28, byte / 255; the labels beside.
if [[ ! -f $dir/x.npy ]]; then
    $py - "$data" "$dir" <<'PY'
import gzip, os, sys, numpy as np
data, out = sys.argv[1:]
def idx(name):
    p = os.path.join(data, name)
    raw = open(p, "rb").read() if os.path.exists(p) else gzip.open(p + ".gz").read()
    return np.frombuffer(raw, np.uint8, offset=16 if "images" in name else 8)
np.save(f"{out}/x.npy", (idx("t10k-images-idx3-ubyte").astype(np.float32) / np.float32(255)).reshape(-1, 1, 28, 28))
np.save(f"{out}/labels.npy", idx("t10k-labels-idx1-ubyte"))
PY
fi

if [[ $cmd == prepare ]]; then
    for m in lenet5 mlp cnn; do
        "$bin" train --model $m --variant omp --epochs 1 --train-limit 6000 --data "$data" --save "$dir/$m.ck" >/dev/null
        "$bin" export --model "$dir/$m.ck" --onnx "$dir/$m.onnx" >/dev/null
        "$bin" eval --model "$dir/$m.ck" --variant omp --data "$data" --json "$dir/eval_$m.json" >/dev/null
    done
    cp tests/data/onnx/mnist_cnn.onnx "$dir/torch_cnn.onnx"
    for m in lenet5 mlp cnn torch_cnn; do
        node bench/peers/onnxruntime_run.js --model "$dir/$m.onnx" --input "$dir/x.npy" --output "$dir/ort_$m.npy" \
            --batch 100 --repeats 0 >/dev/null
    done
    echo "round_trip: prepared $dir"
    exit 0
fi
[[ $cmd == check ]] || { echo "round_trip: unknown command '$cmd' (prepare, check)" >&2; exit 2; }
variants=${4:-cpu avx omp gpu gpu-constant gpu-local}
dev=${5:-$(bench/gpu/gpu_device.sh "$bin" 2>/dev/null)} || true
device=${dev:+--device $dev}
for m in lenet5 mlp cnn torch_cnn; do
    for v in $variants; do
        for src in onnx ck; do
            [[ -f $dir/$m.$src ]] || continue
            flag=$([[ $src == onnx ]] && echo --onnx || echo --model)
            # shellcheck disable=SC2086
            "$bin" infer $flag "$dir/$m.$src" --input "$dir/x.npy" --batch 100 --variant "$v" $device \
                --output "$dir/y_${m}_${v}_$src.npy" >/dev/null
        done
    done
done
$py - "$dir" "$variants" <<'PY'
import json, os, sys, numpy as np
d, variants = sys.argv[1], sys.argv[2].split()
labels, ok = np.load(f"{d}/labels.npy"), True
print(f"{'model':<10} {'variant':<13} {'from':<5} {'rel. error':>10}  {'top-1':<9} {'accuracy':>8}  eval")
for m in ("lenet5", "mlp", "cnn", "torch_cnn"):
    ort = np.load(f"{d}/ort_{m}.npy")
    ev = json.load(open(f"{d}/eval_{m}.json"))["test_accuracy"] if os.path.exists(f"{d}/eval_{m}.json") else None
    for v in variants:
        for src in ("onnx", "ck"):
            f = f"{d}/y_{m}_{v}_{src}.npy"
            if not os.path.exists(f):
                continue
            y = np.load(f)
            rel = (np.linalg.norm(y - ort, axis=1) / np.linalg.norm(ort, axis=1)).max()
            same = bool((y.argmax(1) == ort.argmax(1)).all())
            acc = float((y.argmax(1) == labels).mean())
            agrees = ev is None or abs(acc - ev) < 1e-9
            ok &= rel < 1e-5 and same and agrees
            print(f"{m:<10} {v:<13} {src:<5} {rel:>10.2e}  {'same' if same else 'DIFFERENT':<9} {100 * acc:>7.2f}%  "
                  + ("-" if ev is None else f"{100 * ev:.2f}%" + ("" if agrees else " DIFFERENT")))
print("round_trip: every output within 1e-5 of onnxruntime, the same predictions and eval's accuracy" if ok
      else "round_trip: FAILED")
sys.exit(0 if ok else 1)
PY
