#!/usr/bin/env bash
# Two ranks against one process on the host's cores: the CNN at batch 256 on omp (its epoch cut to
# 15,360 images, 60 steps) and LeNet-5 at batch 256 (a whole epoch), as one rank with --threads 2 and
# as `mpirun -np 2` ranks with --threads 1 each, interleaved ROUNDS times (default 3). Prints each
# run's wall seconds and loss, then per model the medians and the ratio two ranks / one rank.
#   bench/cpu/ranks_cpu.sh [BINARY, default build/lenet5] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-build/lenet5}
rounds=${2:-3}
data=${LENET5_DATA:-data/mnist}
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
json=$(mktemp "${TMPDIR:-/tmp}/ranks_cpu_XXXXXX")
trap 'rm -f "$json"' EXIT
declare -A args=(
    [cnn]="--model cnn --variant omp --batch 256 --train-limit 15360 --test-limit 1000 --epochs 1"
    [lenet5]="--variant omp --batch 256 --test-limit 1000 --epochs 1"
)
epoch() {  # wall seconds and training loss of the run's epoch
    /usr/bin/python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["epochs"][0]; print("%.2f %.6f" % (e["wall_ms"]/1000, e["train_loss"]))' "$json"
}
for model in cnn lenet5; do
    one=() two=()
    for ((r = 1; r <= rounds; r++)); do
        "$bin" train ${args[$model]} --data "$data" --threads 2 --json "$json" >/dev/null
        read -r s loss < <(epoch); one+=("$s"); echo "$model one rank, --threads 2: $s s, loss $loss"
        mpirun --oversubscribe -np 2 "$bin" train ${args[$model]} --data "$data" --threads 1 --json "$json" >/dev/null
        read -r s loss < <(epoch); two+=("$s"); echo "$model mpirun -np 2, --threads 1: $s s, loss $loss"
    done
    /usr/bin/python3 - "$model" "${one[*]}" "${two[*]}" <<'PY'
import statistics, sys
one = statistics.median(map(float, sys.argv[2].split())); two = statistics.median(map(float, sys.argv[3].split()))
print("%s: one rank %.2f s, two ranks %.2f s (medians): %.2fx" % (sys.argv[1], one, two, two / one))
PY
done
