#!/usr/bin/env bash
# Several builds of lenet5_bench_layers side by side on a noisy machine: each runs the benchmarks
# matching FILTER 10 times, ROUNDS times (default 3), the builds alternating; prints per build the
# best (minimum) real time of each benchmark, which a busy machine's interruptions do not reach
# (a median still moves 10-30% on this project's shared 2 cores), and the median of all its runs
# (for steps on two threads, whose best is a lucky run with the threads evenly slowed).
#   bench/cpu/layers_best.sh FILTER BINARY... (e.g. 'forward/(C1|C3)/avx$' old/lenet5_bench_layers build/lenet5_bench_layers)
set -euo pipefail
filter=${1:?usage: bench/cpu/layers_best.sh FILTER BINARY...}; shift
(($# > 0)) || { echo "layers_best.sh: error: no lenet5_bench_layers binary given" >&2; exit 1; }
R=$(mktemp -d)
trap 'rm -rf "$R"' EXIT
for round in $(seq "${ROUNDS:-3}"); do
    for i in $(seq $#); do
        "${!i}" --benchmark_filter="$filter" --benchmark_repetitions=10 --benchmark_format=json 2>/dev/null \
            > "$R/$i.$round.json"
    done
done
for i in $(seq $#); do
    /usr/bin/python3 - "${!i}" "$R"/"$i".*.json <<'PY'
import json, statistics, sys
times = {}
for path in sys.argv[2:]:
    for b in json.load(open(path))["benchmarks"]:
        if b.get("run_type") == "iteration":
            times.setdefault(b["run_name"], []).append(b["real_time"])
print(sys.argv[1])
for name, t in sorted(times.items()):
    print("  %-45s %12.0f ns   median %12.0f ns of %d" % (name, min(t), statistics.median(t), len(t)))
PY
done
