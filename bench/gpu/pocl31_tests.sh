#!/usr/bin/env bash
# The unit tests through Debian 12's PoCL 3.1 on the lent GPU machine's AVX-512 CPU (issue 47: the
# machine the fused MLP step trained wrong on had this PoCL and AVX-512), under each of PoCL's
# work-group methods that PoCL 3.1 knows, each with a fresh kernel cache.
#   bench/gpu/pocl31_tests.sh BUNDLE PROBE_DIR [GTEST_FILTER]
# BUNDLE: bench/gpu/make_gpu_bundle.sh's folder, made with LENET5_BUNDLE_TESTS=1 (it has lenet5_tests);
# PROBE_DIR as bench/gpu/pocl31_probe.sh takes it (pocl31.tar.xz, mnist/, and bundle.tar.xz).
# Environment: METHODS (default "loopvec loops"), SECONDS_EACH (a method's limit, 270), SHARDS (test
# processes run side by side, each a GoogleTest shard with its own fresh kernel cache; default 1),
# LOG_DIR (if set, each method's and shard's whole output goes to LOG_DIR/METHOD_shardN.txt; the
# terminal gets only failures and totals either way).
# GTEST_FILTER: default, the OpenCL agreement tests of the pocl-methods label (every variant against
# cpu, fused against unfused steps, bit-identical reruns) and the phase-time test the MLP failed (the
# whole suite takes over 4 minutes a method on 16 cores; the probe's MNIST has 6,000 training images,
# and the machine has no mpirun or onnxruntime). Run from the checkout the tests were built from, or a
# copy of it: the tests find models/ and tests/data/ through the source path built into them, which
# is linked to this checkout when it is missing here.
set -uo pipefail
source "$(dirname "$(realpath "$0")")/pocl31_env.sh" "$1" "$2"
filter=${3:-OpenCL/OpenCLVariant.*:OpenCL/PersistentSteps.*:Training.PhaseTimesAreRealSharesOfTheEpoch}
checkout=$(realpath "$(dirname "$0")/../..")
built_in=$(strings "$bundle/lenet5_tests" | grep -m1 -oE '^/.*/models/lenet5-fast\.net$' | sed 's|/models/lenet5-fast.net$||')
[[ -n $built_in && ! -e $built_in ]] && mkdir -p "$(dirname "$built_in")" && ln -s "$checkout" "$built_in"
binary=$(strings "$bundle/lenet5_tests" | grep -m1 -oE '^/.*/build/lenet5$')  # the lenet5 the CLI tests run
[[ -n $binary && ! -e $binary ]] && mkdir -p "$(dirname "$binary")" && ln -s "$bundle/lenet5" "$binary"
"$bundle/lenet5" devices
export LENET5_DATA=$probe/mnist
logs=${LOG_DIR:-/tmp/pocl31-tests-logs} shards=${SHARDS:-1}
mkdir -p "$logs"
for method in ${METHODS:-loopvec loops}; do
    echo "== POCL_WORK_GROUP_METHOD=$method, a fresh kernel cache a shard, $shards shard(s)"
    for ((shard = 0; shard < $shards; shard++)); do
        log=$logs/${method}_shard$shard.txt cache=/tmp/pocl-cache-tests-$method-$shard
        rm -rf "$cache"
        (POCL_CACHE_DIR=$cache POCL_WORK_GROUP_METHOD=$method GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$shard \
            timeout "${SECONDS_EACH:-270}" "$bundle/lenet5_tests" --gtest_filter="$filter" >"$log" 2>&1
         echo "exit $?" >>"$log") &
    done
    wait
    for ((shard = 0; shard < $shards; shard++)); do
        echo "-- shard $shard"
        grep -E '^\[ +(FAILED|SKIPPED|PASSED) +\]|^\[=+\] .* ran|^exit |Failure' \
            "$logs/${method}_shard$shard.txt"
    done
done
