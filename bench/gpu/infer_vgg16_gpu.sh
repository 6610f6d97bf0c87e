#!/usr/bin/env bash
# Issue 13 on a GPU: VGG16 (made here by bench/onnx/make_vgg16_onnx.py, seed 1) on 16 random images
# through every OpenCL variant under --conv-algo auto (Winograd for the 3x3 layers) and gpu-local
# with --conv-algo direct, at batch 1 and 16, beside PyTorch + cuDNN (strict fp32) on the same
# images; each reports the median of REPEATS timed passes. Then our outputs against PyTorch's
# and onnxruntime's (relative error per output vector, top-1).
#   bench/gpu/infer_vgg16_gpu.sh [LENET5_BINARY, default build/lenet5]   (results under $OUT, default /tmp/lenet5-gpu/out)
# Needs python3 with PyTorch + CUDA and numpy. NVIDIA's OpenCL must be registered
# (/etc/OpenCL/vendors/nvidia.icd). Environment: LENET5_DEVICE (default: the first GPU that
# `lenet5 devices` lists, by bench/gpu/gpu_device.sh), REPEATS (default 3).
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build/lenet5}; R=${REPEATS:-3}
DEV=$(bench/gpu/gpu_device.sh "$B") || exit 1
W=/tmp/lenet5-gpu; O=${OUT:-$W/out}; mkdir -p "$W" "$O"
nvidia-smi -L; "$B" devices | head -4
[ -f $W/vgg16.onnx ] || python3 bench/onnx/make_vgg16_onnx.py vgg16 $W/vgg16.onnx --seed 1 || exit 1
python3 -c "import numpy as np; np.save('$W/x.npy', np.random.default_rng(3).uniform(-1, 1, (16, 3, 224, 224)).astype('<f4'))"
# onnxruntime's outputs on the CPU, where its Python package is installed: the issue's reference.
python3 - $W <<'PY' || echo "onnxruntime (Python) not available: outputs checked against PyTorch only"
import sys, numpy as np, onnxruntime as ort
W = sys.argv[1]
s = ort.InferenceSession(f"{W}/vgg16.onnx", providers=["CPUExecutionProvider"])
x = np.load(f"{W}/x.npy")
np.save(f"{W}/y_ort.npy", np.concatenate([s.run(None, {s.get_inputs()[0].name: x[i:i + 4]})[0] for i in range(0, len(x), 4)]))
print("onnxruntime", ort.__version__, "on the CPU: outputs written")
PY
for b in 1 16; do
    python3 bench/onnx/make_vgg16_onnx.py torch-run vgg16 $W/x.npy $W/y_torch_b$b.npy --seed 1 --batch $b --repeats $R | tee $O/torch_b$b.json
    for v in gpu-local gpu gpu-constant; do
        "$B" infer --onnx $W/vgg16.onnx --input $W/x.npy --output $W/y_${v}_b$b.npy --variant $v --device $DEV --batch $b \
            --repeats $R --json $O/${v}_b$b.json 2>&1 | tail -2
    done
    "$B" infer --onnx $W/vgg16.onnx --input $W/x.npy --variant gpu-local --device $DEV --conv-algo direct --batch $b \
        --repeats $R --json $O/direct_b$b.json 2>&1 | tail -1
done
for b in 1 16; do
    python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print('gpu-local batch $b layers:', ' '.join(f\"{l['op'][:4]}:{l['ms_per_image']:.3f}\" for l in j['layers']))" $O/gpu-local_b$b.json
done
python3 - "$W" "$O" <<'PY'
import json, os, sys, numpy as np
W, O = sys.argv[1:]
ok = True
for b in (1, 16):
    t = json.load(open(f"{O}/torch_b{b}.json"))
    ref = np.load(f"{W}/y_torch_b{b}.npy")
    for v in ("gpu-local", "gpu", "gpu-constant"):
        try:
            j = json.load(open(f"{O}/{v}_b{b}.json"))
            y = np.load(f"{W}/y_{v}_b{b}.npy")
        except OSError as e:
            print(f"{v} batch {b}: FAILED ({e})"); ok = False; continue
        checks = []
        for name, r in [("PyTorch", ref)] + ([("onnxruntime", np.load(f"{W}/y_ort.npy"))] if os.path.exists(f"{W}/y_ort.npy") else []):
            rel = (np.linalg.norm(y - r, axis=1) / np.linalg.norm(r, axis=1)).max()
            same = bool((y.argmax(1) == r.argmax(1)).all())
            ok &= rel < 1e-4 and same
            checks.append(f"vs {name} {rel:.2e}, top-1 {'the same' if same else 'DIFFERENT'}")
        print(f"{v:<13} batch {b:<3} {j['ms_per_image']:.3f} ms/image, PyTorch {t['ms_per_image']:.3f} "
              f"(ratio {j['ms_per_image'] / t['ms_per_image']:.2f}); relative error " + "; ".join(checks))
    j = json.load(open(f"{O}/direct_b{b}.json"))
    print(f"gpu-local --conv-algo direct batch {b}: {j['ms_per_image']:.3f} ms/image")
sys.exit(0 if ok else 1)
PY
