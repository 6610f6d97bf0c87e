#!/usr/bin/env bash
# Makes the committed test data of `lenet5 infer` (tests/data/onnx/): the small VGG-shaped model
# of bench/onnx/make_vgg16_onnx.py (seed 1), 4 random input images and the reference outputs of
# onnxruntime (npm onnxruntime-node, bench/peers/onnxruntime_run.js) and PyTorch on them; and for
# `train --model FILE.onnx`, the small MNIST CNN of bench/peers/pytorch_onnx_cnn.py (seed 1), the
# first 8 MNIST test images (byte / 255) and PyTorch's outputs on them (needs MNIST in data/mnist).
# Needs /usr/bin/python3 with torch and numpy, node with onnxruntime-node
# (bench/peers/install_onnxruntime.sh). The files are small (about 130 KB together), so the tests
# need none of these tools.   bench/onnx/make_onnx_test_data.sh [OUT_DIR, default tests/data/onnx]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-tests/data/onnx}
mkdir -p "$out"
py=/usr/bin/python3
$py bench/onnx/make_vgg16_onnx.py small "$out/small.onnx" --seed 1
$py -c "import numpy as np, sys; np.save(sys.argv[1], np.random.default_rng(7).uniform(-1, 1, (4, 3, 32, 32)).astype('<f4'))" "$out/small_x.npy"
$py bench/onnx/make_vgg16_onnx.py torch-run small "$out/small_x.npy" "$out/small_y_torch.npy" --seed 1 --repeats 1 >/dev/null
node bench/peers/onnxruntime_run.js --model "$out/small.onnx" --input "$out/small_x.npy" --output "$out/small_y_ort.npy" \
    --batch 4 --repeats 1 >/dev/null
$py bench/peers/pytorch_onnx_cnn.py make "$out/mnist_cnn.onnx" --seed 1 --data data/mnist --images 8 \
    --x "$out/mnist_cnn_x.npy" --y "$out/mnist_cnn_y_torch.npy"
$py - "$out" <<'PY'
import numpy as np, sys
d = sys.argv[1]
ort, pt = np.load(f"{d}/small_y_ort.npy"), np.load(f"{d}/small_y_torch.npy")
rel = np.linalg.norm(ort - pt, axis=1) / np.linalg.norm(pt, axis=1)
assert rel.max() < 1e-5 and (ort.argmax(1) == pt.argmax(1)).all(), rel
print(f"make_onnx_test_data: {d}: onnxruntime and PyTorch agree (largest relative difference {rel.max():.2e}); "
      f"top-1 {ort.argmax(1).tolist()}")
PY
