#!/usr/bin/env bash
# Does a second GPU pay? The CNN at global batch 1024 and 4096, and LeNet-5 at 64, for 3 epochs on
# one GPU and on two (even split): exact, --grad-precision bf16, --sync-every 4, 8 and 16 (and 16 with
# the measured split), and under `mpirun -np 2` when the bundle has lenet5-mpi. From a bundle
# (LENET5_BUNDLE_MPI=1 bench/make_gpu_bundle.sh), on a machine with two GPUs:
#   bench/exchange_scaling_gpu.sh BUNDLE_DIR
# Prints each run's epoch rows and a summary line: median wall ms of epochs 2-3, final test accuracy.
cd "${1:?usage: bench/exchange_scaling_gpu.sh BUNDLE_DIR}"
export LD_LIBRARY_PATH=$PWD/lib
mkdir -p /etc/OpenCL/vendors
[ -f /etc/OpenCL/vendors/nvidia.icd ] || echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
read -r a b < <(./lenet5 devices | grep -i nvidia | cut -d: -f1 | head -2 | paste -sd' ')
echo "GPUs: $a $b"
./lenet5_exchange_bench pinned --model cnn --device "$a"

summary() {  # the JSON report: median wall ms of the epochs after the first, and the final accuracy
    python3 - "$1" <<'PY'
import json, statistics, sys
r = json.load(open(sys.argv[1]))
walls = [e["wall_ms"] for e in r["epochs"][1:]]
print("   -> %.1f ms per epoch (epochs 2-%d), test %.2f%%" % (statistics.median(walls), len(r["epochs"]),
      100 * r["final_test_accuracy"]))
PY
}
run() {  # run LABEL COMMAND...
    local label=$1; shift
    echo "== $label: $*"
    "$@" --epochs 3 --data mnist --json /tmp/scaling.json 2>&1 | grep -v '^\s*$' && summary /tmp/scaling.json
}
for batch in 1024 4096; do
    m="--model cnn --batch $batch"
    run "cnn $batch one GPU" ./lenet5 train $m --device "$a"
    run "cnn $batch two, exact" ./lenet5 train $m --workers "$a@1,$b@1"
    run "cnn $batch two, bf16" ./lenet5 train $m --workers "$a@1,$b@1" --grad-precision bf16
    for k in 4 8 16; do
        run "cnn $batch two, sync-every $k" ./lenet5 train $m --workers "$a@1,$b@1" --sync-every $k
    done
    run "cnn $batch two, sync-every 16, measured shares" ./lenet5 train $m --workers "$a,$b" --sync-every 16
    if [[ -x ./lenet5-mpi ]]; then
        run "cnn $batch mpirun -np 2, exact" env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
            mpirun -np 2 -x LD_LIBRARY_PATH ./lenet5-mpi train $m --variant gpu-local
        run "cnn $batch mpirun -np 2, sync-every 8" env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
            mpirun -np 2 -x LD_LIBRARY_PATH ./lenet5-mpi train $m --variant gpu-local --sync-every 8
    fi
done
run "lenet5 64 one GPU" ./lenet5 train --batch 64 --device "$a"
run "lenet5 64 two, exact" ./lenet5 train --batch 64 --workers "$a@1,$b@1"
run "lenet5 64 two, sync-every 8" ./lenet5 train --batch 64 --workers "$a@1,$b@1" --sync-every 8
