#!/usr/bin/env bash
# Does a second GPU pay, and a fourth? The CNN at global batch 1024 and 4096, and LeNet-5 at 64, for
# 3 epochs on one GPU and on N (even split; N = 2, and 4 where the machine has four): exact,
# --grad-precision bf16, --sync-every 8, 16 and 32; and when the bundle has lenet5-mpi, exact, 16 and
# 32 under `mpirun -np N --map-by slot:PE=C` (each rank bound to its share C of the cores), at N = 2
# also with --bind-to none, with mpirun's default binding (a core per rank), and through
# MPI_Iallreduce instead of the shared window (LENET5_MPI_SHARED=0), to show what each is worth.
# From a bundle (LENET5_BUNDLE_MPI=1 bench/gpu/make_gpu_bundle.sh), on a machine with several GPUs:
#   bench/gpu/exchange_scaling_gpu.sh BUNDLE_DIR [MAX_GPUS]     (default: every NVIDIA GPU listed)
# Prints each run's epoch rows and a summary line: median wall ms of epochs 2-3 (over REPEATS runs of
# each, default 1), final test accuracy.
source "$(dirname "$(realpath "$0")")/bundle_env.sh" "${1:?usage: bench/gpu/exchange_scaling_gpu.sh BUNDLE_DIR [MAX_GPUS]}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
cores=$(nproc)
echo "CPUs: $cores"
mapfile -t gpus < <(./lenet5 devices | grep -i nvidia | cut -d: -f1 | head -"${2:-8}")
echo "GPUs: ${gpus[*]}"
((${#gpus[@]} >= 2)) || { echo "exchange_scaling_gpu.sh: error: fewer than two NVIDIA GPUs listed" >&2; exit 1; }
./lenet5_exchange_bench pinned --model cnn --device "${gpus[0]}"

summary() {  # the JSON reports: median wall ms of the epochs after the first over every repeat, final accuracy
    python3 - "$@" <<'PY'
import json, statistics, sys
walls, accs = [], []
for path in sys.argv[1:]:
    r = json.load(open(path))
    walls += [e["wall_ms"] for e in r["epochs"][1:]]
    accs.append("%.2f%%" % (100 * r["final_test_accuracy"]))
print("   -> %.1f ms per epoch (median of epochs 2-%d over %d runs: %s), test %s" % (statistics.median(walls),
      len(r["epochs"]), len(sys.argv) - 1, " ".join("%.1f" % w for w in walls), " ".join(sorted(set(accs)))))
PY
}
run() {  # run LABEL COMMAND...: REPEATS times (default 1)
    local label=$1 reports=() i; shift
    echo "== $label: $*"
    for ((i = 1; i <= ${REPEATS:-1}; i++)); do
        "$@" --epochs 3 --data mnist --json /tmp/scaling_$i.json 2>&1 | grep -v '^\s*$' || return
        reports+=(/tmp/scaling_$i.json)
    done
    summary "${reports[@]}"
}
workers() {  # the first N GPUs, an even split: "0@1,1@1"
    local list="" g
    for g in "${gpus[@]:0:$1}"; do list+="${list:+,}$g@1"; done
    echo "$list"
}
mpi=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -x LD_LIBRARY_PATH)
counts=(2)
((${#gpus[@]} >= 4)) && counts+=(4)
for batch in 1024 4096; do
    m="--model cnn --batch $batch"
    run "cnn $batch one GPU" ./lenet5 train $m --device "${gpus[0]}"
    for n in "${counts[@]}"; do
        w=$(workers "$n")
        run "cnn $batch $n GPUs, exact" ./lenet5 train $m --workers "$w"
        run "cnn $batch $n GPUs, bf16" ./lenet5 train $m --workers "$w" --grad-precision bf16
        for k in 8 16 32; do
            run "cnn $batch $n GPUs, sync-every $k" ./lenet5 train $m --workers "$w" --sync-every $k
        done
        [[ -x ./lenet5-mpi ]] || continue
        pe=$((cores / n))  # each rank bound to its share of the CPUs (hardware threads)
        for k in 1 16 32; do
            run "cnn $batch mpirun -np $n --map-by slot:PE=$pe, sync-every $k" \
                "${mpi[@]}" -np "$n" --use-hwthread-cpus --map-by "slot:PE=$pe" ./lenet5-mpi train $m --variant gpu-local --sync-every $k
        done
        if ((n == 2)); then  # what the binding and the shared window are worth
            run "cnn $batch mpirun -np 2 --bind-to none (a share of OpenMP threads each), sync-every 16" \
                "${mpi[@]}" -np 2 --bind-to none ./lenet5-mpi train $m --variant gpu-local --sync-every 16
            run "cnn $batch mpirun -np 2 (default binding: a core per rank), sync-every 16" \
                "${mpi[@]}" -np 2 ./lenet5-mpi train $m --variant gpu-local --sync-every 16
            run "cnn $batch mpirun -np 2 --map-by slot:PE=$pe, LENET5_MPI_SHARED=0 (MPI_Iallreduce), sync-every 16" \
                env LENET5_MPI_SHARED=0 "${mpi[@]}" -x LENET5_MPI_SHARED -np 2 --use-hwthread-cpus --map-by "slot:PE=$pe" ./lenet5-mpi \
                train $m --variant gpu-local --sync-every 16
        fi
    done
done
run "lenet5 64 one GPU" ./lenet5 train --batch 64 --device "${gpus[0]}"
for n in "${counts[@]}"; do
    run "lenet5 64 $n GPUs, exact" ./lenet5 train --batch 64 --workers "$(workers "$n")"
    run "lenet5 64 $n GPUs, sync-every 8" ./lenet5 train --batch 64 --workers "$(workers "$n")" --sync-every 8
done
