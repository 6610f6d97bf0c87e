#!/usr/bin/env bash
# Issue 12 on a GPU: `lenet5 convbench` (direct, im2col, clblast; forward and both backward passes,
# each checked against the scalar reference) on the seed's grid and VGG16's 3x3 layers at batch 1
# and 16, then bench/peers/cudnn_conv.py (PyTorch + cuDNN, strict fp32) on the same cases, which
# prints cuDNN beside our best algorithm as ratios. Then the CNN (models/cnn.net) at batch 1024
# through the batch-level engine: `tune --conv` picks its convolution's algorithm, and 2 epochs
# run with the tuned choice, the engine's own kernels, direct and im2col.
#   bench/gpu/convbench_gpu.sh [LENET5_BINARY [MNIST_DIR]]   (defaults build/lenet5, data/mnist)
# Results under $OUT (default /tmp/lenet5-conv/out). Environment: LENET5_DEVICE (default: the first GPU
# that `lenet5 devices` lists, by bench/gpu/gpu_device.sh), REPEATS (default 5), CONVBENCH_ARGS (extra
# flags for both, e.g. "--cases seed").
# Needs python3 with PyTorch + CUDA; NVIDIA's OpenCL registered (/etc/OpenCL/vendors/nvidia.icd).
# Exit status 1 when a row FAILED its check or the peer failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build/lenet5}; D=${2:-data/mnist}
O=${OUT:-/tmp/lenet5-conv/out}; mkdir -p "$O"
DEV=$(bench/gpu/gpu_device.sh "$B") || exit 1
REPEATS=${REPEATS:-5}; EXTRA=${CONVBENCH_ARGS:-}
nvidia-smi -L; "$B" devices | head -6; "$B" --version | tail -1
# convbench's stderr apart from its table: NVIDIA's OpenCL compiler prints diagnostics there.
"$B" convbench --device $DEV --repeats $REPEATS --json $O/convbench.json $EXTRA 2> $O/convbench.stderr | tee $O/convbench.txt
ours=${PIPESTATUS[0]}
if [ -s $O/convbench.stderr ]; then echo "convbench's stderr:"; cat $O/convbench.stderr; fi
python3 bench/peers/cudnn_conv.py --repeats $REPEATS --json $O/cudnn.json --compare $O/convbench.json $EXTRA 2>&1 \
  | tee $O/cudnn.txt
peer=${PIPESTATUS[0]}
echo "convbench exit $ours (1: a FAILED row), cudnn_conv exit $peer"
export LENET5_CONV_TUNING=$O/conv-tuning.tsv
rm -f $LENET5_CONV_TUNING
"$B" tune --conv --model cnn --batch 1024 --device $DEV 2>&1 | tee $O/tune_conv.txt
cat $LENET5_CONV_TUNING
for a in auto own direct im2col; do
  "$B" train --model cnn --batch 1024 --epochs 2 --device $DEV --variant gpu-local --conv-algo $a --data "$D" \
    --json $O/cnn_$a.json 2>&1 | tail -2 | sed "s/^/$a: /"
done
[ $ours -eq 0 ] && [ $peer -eq 0 ]
