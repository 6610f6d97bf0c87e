#!/usr/bin/env bash
# Before and after one change to the exchange, on a machine with two GPUs: the CNN at global batch
# 1024 and 4096 for 3 epochs in the exact mode (every step's gradients summed), on one GPU, on two
# with --workers, and under `mpirun -np 2` (each rank bound to half the cores), each run REPEATS
# times (default 3), the two builds alternating so that the machine's drift slows both alike.
#   bench/gpu/exchange_overlap_gpu.sh BUNDLE_DIR OLD_DIR
# BUNDLE_DIR: LENET5_BUNDLE_MPI=1 bench/gpu/make_gpu_bundle.sh's folder (its lenet5, lenet5-mpi, lib/
# and mnist/); OLD_DIR: lenet5 and lenet5-mpi of the build to compare with (same libraries).
# Prints each run's epochs and per configuration the median wall ms of epochs 2-3, old and new.
set -uo pipefail
bundle=$(realpath "${1:?usage: bench/gpu/exchange_overlap_gpu.sh BUNDLE_DIR OLD_DIR}")
old=$(realpath "${2:?old build folder}")
source "$(dirname "$(realpath "$0")")/bundle_env.sh" "$bundle"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
cores=$(nproc)
mapfile -t gpus < <(./lenet5 devices | grep -i nvidia | cut -d: -f1 | head -2)
echo "CPUs: $cores, GPUs: ${gpus[*]}"
((${#gpus[@]} == 2)) || { echo "exchange_overlap_gpu.sh: error: fewer than two NVIDIA GPUs listed" >&2; exit 1; }
mpi=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -x LD_LIBRARY_PATH -np 2
     --use-hwthread-cpus --map-by "slot:PE=$((cores / 2))")
R=$(mktemp -d)
for batch in 1024 4096; do
    m=(--model cnn --batch "$batch" --epochs 3 --data mnist)
    for ((i = 1; i <= ${REPEATS:-3}; i++)); do
        for which in old new; do
            dir=$bundle; [ "$which" = old ] && dir=$old
            for config in one workers mpirun; do
                out=$R/${batch}_${config}_${which}_$i.json
                echo "== cnn $batch $config $which run $i"
                case $config in
                    one) "$dir/lenet5" train "${m[@]}" --device "${gpus[0]}" --json "$out" ;;
                    workers) "$dir/lenet5" train "${m[@]}" --workers "${gpus[0]}@1,${gpus[1]}@1" --json "$out" ;;
                    mpirun) "${mpi[@]}" "$dir/lenet5-mpi" train "${m[@]}" --variant gpu-local --json "$out" ;;
                esac 2>&1 | grep -E '^ +[0-9]+ ' || echo "   (failed)"
            done
        done
    done
done
python3 - "$R" <<'PY'
import glob, json, os, statistics, sys
rows = {}
for path in glob.glob(os.path.join(sys.argv[1], "*.json")):
    batch, config, which, _ = os.path.basename(path)[:-5].split("_")
    r = json.load(open(path))
    rows.setdefault((int(batch), config), {}).setdefault(which, []).extend(e["wall_ms"] for e in r["epochs"][1:])
    rows[(int(batch), config)].setdefault(which + "_acc", set()).add("%.2f%%" % (100 * r["final_test_accuracy"]))
print("batch  config    old ms   new ms   new/old  accuracy old / new")
for (batch, config), v in sorted(rows.items()):
    o, n = statistics.median(v.get("old", [0])), statistics.median(v.get("new", [0]))
    print("%5d  %-8s %7.1f  %7.1f   %6.3f   %s / %s" % (batch, config, o, n, n / o if o else 0,
          " ".join(sorted(v.get("old_acc", []))), " ".join(sorted(v.get("new_acc", [])))))
PY
