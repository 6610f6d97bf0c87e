#!/usr/bin/env bash
# LeNet-5 on `omp` against PyTorch on the CPU, thread count by thread count: bench/epoch_bench.py
# once for each count in THREADS, each in the same command beside PyTorch on as many threads.
#   bench/cpu/omp_threads.sh [LENET5_BINARY [DATA_DIR [OUT_DIR]]]
#     (defaults build/lenet5, data/mnist, bench/results/omp_threads; THREADS="1 2 4 8 16",
#      REPEATS=3, EPOCHS=1, BATCH=64, PYTHON=python3: the interpreter that has PyTorch)
# Prints each count's table (OUT_DIR/threads-T/epochs.md) and a summary line per count.
set -euo pipefail
here=$(dirname "$0")/..
binary=${1:-build/lenet5}
data=${2:-data/mnist}
out=${3:-$here/results/omp_threads}
[ -x "$binary" ] || { echo "omp_threads.sh: error: $binary is not an executable (build lenet5, or pass its path)" >&2; exit 1; }
for t in ${THREADS:-1 2 4 8 16}; do
    [[ $t =~ ^[1-9][0-9]*$ ]] || { echo "omp_threads.sh: error: THREADS holds '$t', not a thread count" >&2; exit 1; }
    "${PYTHON:-python3}" "$here/epoch_bench.py" --binary "$binary" --variants omp --peer cpu --threads "$t" \
        --epochs "${EPOCHS:-1}" --batch "${BATCH:-64}" --repeats "${REPEATS:-3}" --data "$data" \
        --python "${PYTHON:-python3}" --out "$out/threads-$t" >/dev/null
    "${PYTHON:-python3}" - "$out/threads-$t/epochs.json" "$t" <<'PY'
import json, sys
rows = {r["name"]: r for r in json.load(open(sys.argv[1]))}
ours, peer = rows.get("omp"), rows.get("pytorch cpu")
if ours is None:
    sys.exit("omp_threads.sh: error: no omp row in %s (see epochs.md there)" % sys.argv[1])
line = "threads %3s: omp %9.1f ms (%.2f%%)" % (sys.argv[2], ours["wall_ms"], 100 * ours["test_accuracy"])
if peer:
    line += ", PyTorch %9.1f ms (%.2f%%), %.1fx" % (peer["wall_ms"], 100 * peer["test_accuracy"],
                                                   peer["wall_ms"] / ours["wall_ms"])
print(line)
PY
done
