#!/usr/bin/env bash
# Two builds of LeNet-5 on gpu-local, alternating on one GPU, each with its own tuned work-groups:
# the quick check of a kernel change before bench/gpu/lenet5_gpu_speed.sh's full table. From a bundle
# (bench/gpu/make_gpu_bundle.sh) and an older build's binary made the same way:
#   bench/gpu/lenet5_gpu_ab.sh BUNDLE_DIR OLD_BINARY [ROUNDS]   (default 3 rounds)
# Prints each build's tuned us per step (lenet5 tune, batch 64 and 256), each kernel's device time
# per step at both batches (--kernel-profile, one epoch of 12,800 images), then per round, build
# and batch the median wall ms of epochs 2-3 and the test accuracy after 3 epochs.
bundle=${1:?usage: bench/gpu/lenet5_gpu_ab.sh BUNDLE_DIR OLD_BINARY [ROUNDS]}; old=$(realpath "${2:?old binary}")
rounds=${3:-3}
bench=$(dirname "$(realpath "$0")")
source "$bench/bundle_env.sh" "$bundle"
dev=$("$bench/gpu_device.sh" ./lenet5) || exit 1
echo "device $dev: $(./lenet5 devices | grep "^$dev:")"
cache=$(mktemp -d)
binary() { if [ "$1" = old ]; then echo "$old"; else echo ./lenet5; fi; }
for which in old new; do
    for batch in 64 256; do
        echo "== $which build, batch $batch: lenet5 tune"
        LENET5_TUNING=$cache/$which.tsv "$(binary $which)" tune --device "$dev" --variant gpu-local --batch $batch |
            grep -vE '^lenet5 tune|^cached in'
        echo "== $which build, batch $batch: --kernel-profile"
        LENET5_TUNING=$cache/$which.tsv "$(binary $which)" train --variant gpu-local --device "$dev" --batch $batch \
            --epochs 1 --train-limit 12800 --test-limit 1000 --data mnist --kernel-profile | sed -n '/kernel/,$p'
    done
done
for round in $(seq "$rounds"); do
    for which in old new; do
        for batch in 64 256; do
            LENET5_TUNING=$cache/$which.tsv "$(binary $which)" train --variant gpu-local --device "$dev" --batch $batch \
                --epochs 3 --data mnist --json "$cache/run.json" >/dev/null || exit 1
            python3 -c "import json, statistics, sys
r = json.load(open(sys.argv[1]))
print('round %s %s batch %-4s %.1f ms per epoch, %.2f%%' % (sys.argv[2], sys.argv[3], sys.argv[4],
      statistics.median(e['wall_ms'] for e in r['epochs'][1:]), 100 * r['final_test_accuracy']))" \
                "$cache/run.json" "$round" "$which" "$batch"
        done
    done
done
rm -rf "$cache"
