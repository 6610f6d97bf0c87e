#!/usr/bin/env bash
# The gradient exchange timed by its parts (build/lenet5_exchange_bench), and an epoch on N
# devices predicted from them. Parts: each bucket (layer) read into and written from pinned
# memory on the first OpenCL device; the exchange of two workers in one process (the host sum
# and the write-back); MPI_Allreduce of each bucket and the whole exchange across 2 and 4 local
# ranks; one training step of batch/N samples alone on one device (here: one core, `--threads 1`).
# The prediction for N devices, one rank each: steps x (step of batch/N + exchange across N
# ranks), with no overlap, and steps x max(the two), were the exchange wholly hidden behind the
# backward pass; with an OpenCL device, its pinned reads and writes are added as a third column.
#   bench/cpu/exchange_bench.sh [model, default cnn] [batch, default 256] [variant, default omp]
# TRAIN_IMAGES (default 60000) sets the epoch. 4 ranks on fewer cores are oversubscribed: their
# MPI times are then an upper bound.
set -euo pipefail
cd "$(dirname "$0")/../.."
bench=${LENET5_EXCHANGE_BENCH:-build/lenet5_exchange_bench}
model=${1:-cnn}
batch=${2:-256}
variant=${3:-omp}
images=${TRAIN_IMAGES:-60000}
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
out=$(mktemp "${TMPDIR:-/tmp}/exchange_bench_XXXXXX")
trap 'rm -f "$out"' EXIT

"$bench" pinned --model "$model" >>"$out" 2>/dev/null || echo "# no OpenCL device: no pinned transfers timed" >>"$out"
"$bench" host --model "$model" >>"$out"
for n in 2 4; do mpirun --oversubscribe -np "$n" "$bench" ranks --model "$model" >>"$out"; done
for n in 1 2 4; do
    "$bench" step --model "$model" --variant "$variant" --threads 1 --batch $((batch / n)) >>"$out"
done
cat "$out"

awk -v batch="$batch" -v images="$images" -v model="$model" '
    function field(line, key,    i, n, kv) {
        n = split(line, kv, " ")
        for (i = 1; i <= n; i++) if (index(kv[i], key "=") == 1) return substr(kv[i], length(key) + 2)
        return ""
    }
    /^step / { step[batch / field($0, "samples")] = field($0, "us") / 1000 }
    /^ranks / { exchange[field($0, "ranks")] = field($0, "exchange_us") / 1000 }
    /^pinned / { pinned += (field($0, "read_us") + field($0, "write_us")) / 1000 }
    END {
        steps = int((images + batch - 1) / batch)
        printf "\n%s, batch %d, %d images: %d steps an epoch\n", model, batch, images, steps
        printf "devices  step_ms  exchange_ms  epoch_s (no overlap)  epoch_s (hidden)%s\n", pinned ? "  epoch_s (+ pinned read/write)" : ""
        printf "%7d  %7.1f  %11s  %20.2f  %16.2f%s\n", 1, step[1], "-", steps * step[1] / 1000, steps * step[1] / 1000, pinned ? sprintf("  %29s", "-") : ""
        for (n = 2; n <= 4; n *= 2) {
            s = step[n]; x = exchange[n]
            printf "%7d  %7.1f  %11.1f  %20.2f  %16.2f", n, s, x, steps * (s + x) / 1000, steps * (s > x ? s : x) / 1000
            if (pinned) printf "  %29.2f", steps * (s + x + pinned) / 1000
            printf "\n"
        }
    }' "$out"
