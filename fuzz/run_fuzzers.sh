#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (AddressSanitizer + UBSan) and runs each
# for a bounded time from a seed corpus. Exits non-zero on any crash, leak or
# sanitizer report.   fuzz/run_fuzzers.sh [seconds per target, default 60] [executions, default no limit]
# Each target stops at whichever limit comes first.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
runs=${2:--1}
command -v clang++ >/dev/null || { echo "run_fuzzers: clang++ not found (apt-get install clang)"; exit 1; }

cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLENET5_FUZZ=ON \
      -DLENET5_TESTS=OFF -DLENET5_BENCH=OFF -DLENET5_OPENCL=OFF >/dev/null
targets=(idx checkpoint model)
# fuzz_onnx exists when the build found the ONNX library.
if cmake --build build-fuzz --target help | grep fuzz_onnx >/dev/null; then targets+=(onnx); fi
cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]/#/fuzz_}" lenet5

# Seeds: valid small files of each kind, made fresh so they follow the current format.
corpus=build-fuzz/corpus
rm -rf "$corpus" && mkdir -p "$corpus/idx" "$corpus/checkpoint" "$corpus/model" "$corpus/onnx" build-fuzz/tmp
cp models/*.net "$corpus/model/"
cp tests/data/onnx/*.onnx "$corpus/onnx/"
export TMPDIR=$PWD/build-fuzz/tmp  # where fuzz_idx writes its input file
data=${LENET5_DATA:-data/mnist}
python3 - "$corpus/idx" <<'PY'
import gzip, struct, sys
out = sys.argv[1]
img = struct.pack(">IIII", 0x803, 2, 28, 28) + bytes(range(256)) * 6 + bytes(32)
lab = struct.pack(">II", 0x801, 3) + bytes([1, 7, 9])
for name, blob in (("images", img), ("labels", lab)):
    open(f"{out}/{name}", "wb").write(blob)
    open(f"{out}/{name}.gz", "wb").write(gzip.compress(blob))
PY
./build-fuzz/lenet5 train --variant cpu --epochs 1 --train-limit 64 --test-limit 10 --data "$data" \
    --save "$corpus/checkpoint/seed.ck" >/dev/null

# The targets run side by side; each writes build-fuzz/fuzz_<target>.log.
pids=()
for target in "${targets[@]}"; do
    mkdir -p "build-fuzz/findings/$target"
    echo "run_fuzzers: fuzz_$target for ${seconds}s or $runs executions"
    ./build-fuzz/fuzz_$target -max_total_time="$seconds" -runs="$runs" -rss_limit_mb=2048 -max_len=1048576 \
        -artifact_prefix="build-fuzz/findings/$target/" -print_final_stats=1 \
        "$corpus/$target" 2>"build-fuzz/fuzz_$target.log" &
    pids+=($!)
done
status=0
for i in "${!targets[@]}"; do
    log=build-fuzz/fuzz_${targets[i]}.log
    if ! wait "${pids[i]}"; then
        status=1
        tail -40 "$log"
    fi
    echo "run_fuzzers: fuzz_${targets[i]}: $(grep -E "stat::number_of_executed_units|Done" "$log" | tail -2 | tr '\n' ' ')"
done
exit $status
