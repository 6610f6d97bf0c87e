#!/usr/bin/env bash
# Issue 11 on a GPU: the MLP (one sample per step, 4 runs on gpu-local, one each on gpu and
# gpu-constant), the CNN at batch 16 and 1024 (3 runs each) and for 5 epochs at its default batch
# on each OpenCL variant, LeNet-5 at batch 64 (3 runs of 3 epochs, one of 10: the no-regression check), then PyTorch with
# CUDA graphs on the same recipes, all in one command.
#   bench/gpu/models_gpu.sh [LENET5_BINARY [MNIST_DIR]]   (defaults build/lenet5, data/mnist)
# Environment: LENET5_DEVICE (default: the first GPU that `lenet5 devices` lists, by bench/gpu/gpu_device.sh).
# Needs python3 with PyTorch + CUDA.
# NVIDIA's OpenCL must be registered (/etc/OpenCL/vendors/nvidia.icd).
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build/lenet5}; M=${2:-data/mnist}
DEV=$(bench/gpu/gpu_device.sh "$B") || exit 1
D="--data $M --device $DEV"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; "$B" --version | head -1
run() { echo "== ${*:2}"; "$@" 2>&1 | grep -E "^ +[0-9]+ |rror" | cut -c1-120; }
for r in 1 2 3 4; do run "$B" train --model mlp --variant gpu-local $D; done
for v in gpu gpu-constant; do run "$B" train --model mlp --variant $v $D; done
for r in 1 2 3; do run "$B" train --model cnn --variant gpu-local --batch 16 --epochs 2 $D; done
for r in 1 2 3; do run "$B" train --model cnn --variant gpu-local --batch 1024 --epochs 3 $D; done
for v in gpu-local gpu gpu-constant; do run "$B" train --model cnn --variant $v --epochs 5 $D; done
for r in 1 2 3; do run "$B" train --variant gpu-local --epochs 3 $D; done
run "$B" train --variant gpu-local --epochs 10 $D
P=bench/peers
python3 $P/pytorch_models.py --model mlp --device cuda --cuda-graphs --data "$M" 2>&1 | tail -1
python3 $P/pytorch_models.py --model cnn --device cuda --cuda-graphs --batch 16 --epochs 2 --data "$M" 2>&1 | tail -1
python3 $P/pytorch_models.py --model cnn --device cuda --cuda-graphs --batch 1024 --epochs 3 --data "$M" 2>&1 | tail -1
python3 $P/pytorch_lenet5.py --device cuda --cuda-graphs --epochs 3 --data "$M" 2>&1 | tail -1
