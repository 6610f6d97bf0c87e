#!/usr/bin/env bash
# Issue 25's checks on a GPU, by hand, from a bundle (bench/gpu/make_gpu_bundle.sh):
#   bench/gpu/kernel_lab_gpu.sh BUNDLE_DIR
# Dumps the embedded kernels, then: the unmodified dump passes `check` on every OpenCL variant of
# lenet5, mlp and cnn; a flipped sign in sample_layers.cl fails it naming the layer (exit 1); a
# syntax error gives the compiler's log with file:line (exit 1); training from the dump gives the
# embedded kernels' checkpoint byte for byte. Prints each step's last lines and a verdict.
bench=$(dirname "$(realpath "$0")")
source "$bench/bundle_env.sh" "${1:?usage: bench/gpu/kernel_lab_gpu.sh BUNDLE_DIR}"
dev=$("$bench/gpu_device.sh" ./lenet5) || exit 1
echo "device $dev: $(./lenet5 devices | grep "^$dev:")"
L=$(mktemp -d)
./lenet5 kernels --dump "$L/k" || exit 1
verdict=0
expect() {  # expect STATUS LABEL COMMAND...: runs it, shows its last lines, checks the exit status
    local want=$1 label=$2; shift 2
    "$@" > "$L/out" 2>&1; local got=$?
    echo "== $label (exit $got, want $want)"; tail -n 3 "$L/out"
    [ "$got" = "$want" ] || { echo "   UNEXPECTED"; verdict=1; }
}
for m in lenet5 mlp cnn; do
    for v in gpu gpu-constant gpu-local; do
        expect 0 "$m $v, unmodified dump" ./lenet5 check --model "$m" --variant "$v" --device "$dev" --data mnist --kernels "$L/k"
    done
done
cp -r "$L/k" "$L/wrong"
sed -i '0,/const float v = activation_grad(prev_act, x\[i\]) \* sum;/s//const float v = -activation_grad(prev_act, x[i]) * sum;/' "$L/wrong/sample_layers.cl"
cmp -s "$L/k/sample_layers.cl" "$L/wrong/sample_layers.cl" && { echo "the wrong line was not written"; verdict=1; }
for v in gpu gpu-local; do
    expect 1 "lenet5 $v, a flipped sign" ./lenet5 check --variant "$v" --device "$dev" --data mnist --kernels "$L/wrong"
done
cp -r "$L/k" "$L/syntax"
sed -i '0,/sgd_step(params/s//this is not OpenCL;/' "$L/syntax/update.cl"
expect 1 "a syntax error" ./lenet5 train --variant gpu --device "$dev" --epochs 1 --train-limit 64 --data mnist --kernels "$L/syntax"
for k in embedded dump; do
    flag=(); [ $k = dump ] && flag=(--kernels "$L/k")
    expect 0 "train, $k kernels" ./lenet5 train --variant gpu-local --device "$dev" --epochs 1 --train-limit 6400 --test-limit 1000 \
        --data mnist --save "$L/$k.ck" "${flag[@]}"
done
if cmp "$L/embedded.ck" "$L/dump.ck"; then echo "== the checkpoints are byte for byte the same"; else verdict=1; fi
echo "kernel lab on device $dev: $([ $verdict = 0 ] && echo all as expected || echo SOMETHING UNEXPECTED)"
exit $verdict
