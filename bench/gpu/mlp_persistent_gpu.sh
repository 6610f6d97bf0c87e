#!/usr/bin/env bash
# Issue 24's MLP (one sample per step, one epoch) on a GPU: the persistent path (step_run, a run of
# steps in one launch with a grid barrier between them) beside a launch a step (LENET5_PERSISTENT=0),
# on gpu, gpu-constant and gpu-local, 3 rounds alternating the two paths. Per run: the epoch's wall
# ms, the phases' ms and their share of wall_ms, the test accuracy. Then whether each run's
# checkpoint is the same bytes as the first's of its variant (both paths do the same arithmetic, so
# a difference means that a step read stale data), and `lenet5 check` on the MLP. From a bundle
# (bench/gpu/make_gpu_bundle.sh):
#   bench/gpu/mlp_persistent_gpu.sh BUNDLE_DIR [GROUPS...]
# GROUPS (optional): also one gpu-local run of the persistent path in each of these many
# work-groups (LENET5_PERSISTENT=N; the default is one per compute unit).
# Environment: LENET5_DEVICE (default: the first GPU that `lenet5 devices` lists, by bench/gpu/gpu_device.sh).
set -uo pipefail
bundle=${1:?usage: bench/gpu/mlp_persistent_gpu.sh BUNDLE_DIR [GROUPS...]}; shift
bench=$(dirname "$(realpath "$0")")
source "$bench/bundle_env.sh" "$bundle"
dev=$("$bench/gpu_device.sh" ./lenet5) || exit 1
echo "device $dev: $(./lenet5 devices | grep "^$dev:")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run VARIANT PATH ROUND: PATH on (the default), off (LENET5_PERSISTENT=0) or a number of groups.
run() {
    local v=$1 path=$2 round=$3 setting=
    case $path in on) setting= ;; off) setting=0 ;; *) setting=$path ;; esac
    if ! LENET5_PERSISTENT=$setting ./lenet5 train --model mlp --variant "$v" --device "$dev" --data mnist \
            --json "$tmp/run.json" --save "$tmp/$v-$path-$round.ck" >"$tmp/out" 2>&1; then
        echo "$v $path round $round: failed: $(tail -n 1 "$tmp/out")"
        return 1
    fi
    [ "$round" = 1 ] && echo "  $(head -n 1 "$tmp/out" | sed 's/^lenet5: //')"
    python3 -c "import json, sys
r = json.load(open(sys.argv[1])); e = r['epochs'][0]
f, b, u, w = e['forward_ms'], e['backward_ms'], e['update_ms'], e['wall_ms']
print('%-12s %-4s round %s: wall %7.1f ms  forward %6.1f  backward %6.1f  update %6.1f  '
      '(phases %3.0f%% of wall: %2.0f/%2.0f/%2.0f%%)  test %.2f%%' % (sys.argv[2], sys.argv[3], sys.argv[4], w, f, b, u,
      100 * (f + b + u) / w, 100 * f / w, 100 * b / w, 100 * u / w, 100 * r['final_test_accuracy']))" \
        "$tmp/run.json" "$v" "$path" "$round"
}

for round in 1 2 3; do
    for v in gpu gpu-constant gpu-local; do
        for path in on off; do run "$v" "$path" "$round"; done
    done
done
for groups in "$@"; do run gpu-local "$groups" 1; done

echo "checkpoints (the same bytes on both paths, every round):"
for v in gpu gpu-constant gpu-local; do
    runs=()
    for round in 1 2 3; do runs+=("$v-on-$round" "$v-off-$round"); done
    [ $v = gpu-local ] && for groups in "$@"; do runs+=("$v-$groups-1"); done
    same=0 differ=""
    for run in "${runs[@]}"; do
        if cmp -s "$tmp/$v-on-1.ck" "$tmp/$run.ck"; then same=$((same + 1)); else differ+=" $run"; fi
    done
    echo "  $v: ${same} of ${#runs[@]} runs the same as $v-on-1${differ:+; DIFFERENT (or missing):$differ}"
done

./lenet5 check --model mlp --variant gpu-local --device "$dev" --data mnist 2>&1 | tail -n 3
