#!/usr/bin/env bash
# Issue 13 on this machine: VGG16 (bench/onnx/make_vgg16_onnx.py, seed 1) on 10 random images through
# `lenet5 infer --variant omp` beside onnxruntime-node (bench/peers/onnxruntime_run.js) on the same
# threads, at batch 1 and 8, alternating the two so that a busy machine slows both alike; each
# reports the median of its timed passes. Then every host variant's outputs (cpu too: about
# 10 s per image) against onnxruntime's: relative error per output vector < 1e-4, the same top-1.
#   bench/cpu/infer_vgg16_cpu.sh [BUILD_DIR, default build] [THREADS, default 2]
# Work files (the 553 MB model, inputs, outputs) under $LENET5_WORK, default /tmp/lenet5-vgg.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}; threads=${2:-2}; repeats=${REPEATS:-3}
W=${LENET5_WORK:-/tmp/lenet5-vgg}; mkdir -p "$W"
[ -f "$W/vgg16.onnx" ] || /usr/bin/python3 bench/onnx/make_vgg16_onnx.py vgg16 "$W/vgg16.onnx" --seed 1
/usr/bin/python3 -c "import numpy as np, sys; np.save(sys.argv[1], np.random.default_rng(3).uniform(-1, 1, (10, 3, 224, 224)).astype('<f4'))" "$W/x.npy"
# OpenBLAS 0.3.21 (Debian 12) takes AMD Zen 4 for Haswell (AVX2 kernels); on a CPU with AVX-512
# its SkylakeX kernels are 1.6-2x faster. The summary line names the kernels used.
if [ -z "${OPENBLAS_CORETYPE:-}" ] && grep -q avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX; fi
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for b in 1 8; do
    for round in 1 2; do
        node bench/peers/onnxruntime_run.js --model "$W/vgg16.onnx" --input "$W/x.npy" --output "$W/y_ort.npy" \
            --batch $b --threads "$threads" --repeats "$repeats"
        OMP_NUM_THREADS=$threads "$build/lenet5" infer --onnx "$W/vgg16.onnx" --input "$W/x.npy" --output "$W/y_omp.npy" \
            --variant omp --threads "$threads" --batch $b --repeats "$repeats" --json "$W/omp_b$b.json"
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
[ "${CPU_CHECK:-1}" = 1 ] && "$build/lenet5" infer --onnx "$W/vgg16.onnx" --input "$W/x.npy" --output "$W/y_cpu.npy" --variant cpu
/usr/bin/python3 - "$W" <<'PY'
import os, sys, numpy as np
W = sys.argv[1]
ref = np.load(f"{W}/y_ort.npy")
ok = True
for v in ("omp", "cpu"):
    if not os.path.exists(f"{W}/y_{v}.npy"):
        continue
    y = np.load(f"{W}/y_{v}.npy")
    rel = (np.linalg.norm(y - ref, axis=1) / np.linalg.norm(ref, axis=1)).max()
    same = (y.argmax(1) == ref.argmax(1)).all()
    ok &= rel < 1e-4 and same
    print(f"{v}: largest relative error against onnxruntime {rel:.2e}, top-1 {'the same' if same else 'DIFFERENT'}")
sys.exit(0 if ok else 1)
PY
