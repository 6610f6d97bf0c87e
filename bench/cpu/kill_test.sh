#!/usr/bin/env bash
# Kill test of checkpoint saves: `lenet5 train` with one-sample epochs, so that it saves
# a checkpoint every few milliseconds, is SIGKILLed at a random moment within 0.2 s of
# its first save; the checkpoint must then load (lenet5 eval). Counts the rounds whose
# kill landed mid-save (its temporary was left beside the checkpoint) and checks that
# a last save removes every temporary.
#   bench/cpu/kill_test.sh [lenet5 binary, default build/lenet5] [rounds, default 100]
set -euo pipefail
cd "$(dirname "$0")/../.."
lenet5=${1:-build/lenet5}
rounds=${2:-100}
data=${LENET5_DATA:-data/mnist}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lenet5_kill_XXXXXX")
trap 'rm -rf "$tmp"' EXIT
ck=$tmp/model.ck
train=("$lenet5" train --variant cpu --train-limit 1 --test-limit 1 --batch 1 --data "$data" --save "$ck")

"${train[@]}" --epochs 1 >/dev/null  # the checkpoint every round must keep loadable
mid_save=0
for ((round = 1; round <= rounds; round++)); do
    inode=$(stat -c %i "$ck")
    "${train[@]}" --epochs 1000000 >/dev/null 2>&1 &
    pid=$!
    # Each save renames a new file into place: once the inode changes, saves are under way.
    while [ "$(stat -c %i "$ck")" = "$inode" ]; do
        kill -0 "$pid" 2>/dev/null || { echo "kill_test: round $round: lenet5 train ended before a save"; exit 1; }
        sleep 0.01
    done
    sleep "$(awk -v r="$RANDOM" 'BEGIN { printf "%.4f", r / 32767 * 0.2 }')"
    kill -KILL "$pid"
    wait "$pid" 2>/dev/null || true
    if [ -e "$ck.tmp.$pid" ]; then mid_save=$((mid_save + 1)); fi  # its temporary: killed mid-save
    if ! "$lenet5" eval --variant cpu --model "$ck" --data "$data" --test-limit 1 >/dev/null 2>"$tmp/err"; then
        echo "kill_test: round $round: the checkpoint does not load: $(cat "$tmp/err")"
        exit 1
    fi
done
"${train[@]}" --epochs 1 >/dev/null
left=$(find "$tmp" -name 'model.ck.tmp.*' | wc -l)
echo "kill_test: $rounds SIGKILLs, the checkpoint loaded after every one; $mid_save landed mid-save;" \
     "$left temporaries left after the next save"
((left == 0))
