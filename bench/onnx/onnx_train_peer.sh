#!/usr/bin/env bash
# `lenet5 train --model FILE.onnx` beside PyTorch on the same network from the same weights: PyTorch
# makes a small CNN (bench/peers/pytorch_onnx_cnn.py, seed 1) and exports it to ONNX; then for each
# seed both train it one epoch of the first 6,000 MNIST images with lenet5-cl's recipe (batch 64,
# lr 0.05, momentum 0.9, weight decay 0.0005) in the same order (PyTorch replays lenet5's shuffle of
# that seed) and report the train loss and test accuracy; then the medians.
#   bench/onnx/onnx_train_peer.sh [BINARY (build/lenet5)] [VARIANT (omp)] [SEEDS ("1 2 3 4 5")]
# Needs /usr/bin/python3 with torch and numpy (Debian python3-torch, python3-numpy) and MNIST in
# $LENET5_DATA or data/mnist.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-build/lenet5}; variant=${2:-omp}; seeds=${3:-1 2 3 4 5}
export LENET5_DATA=${LENET5_DATA:-$PWD/data/mnist}
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
/usr/bin/python3 bench/peers/pytorch_onnx_cnn.py make "$dir/cnn.onnx" --seed 1
ours=(); theirs=()
for s in $seeds; do
    json="$dir/ours_$s.json"
    "$bin" train --model "$dir/cnn.onnx" --variant "$variant" --epochs 1 --train-limit 6000 --seed "$s" --json "$json" >/dev/null
    read -r a la < <(/usr/bin/python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["epochs"][-1]
print("%.2f %.4f" % (100 * e["test_accuracy"], e["train_loss"]))' "$json")
    read -r b lb < <(/usr/bin/python3 bench/peers/pytorch_onnx_cnn.py train --seed 1 --lenet5-order "$s" |
        /usr/bin/python3 -c 'import json,sys; e=json.loads(sys.stdin.readlines()[-1])
print("%.2f %.4f" % (100 * e["test_accuracy"], e["train_loss"]))')
    echo "seed $s: lenet5 $variant $a% (loss $la), PyTorch $b% (loss $lb)"
    ours+=("$a"); theirs+=("$b")
done
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print (NR % 2 ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2)}'; }
echo "median: lenet5 $variant $(median "${ours[@]}")%, PyTorch $(median "${theirs[@]}")%"
