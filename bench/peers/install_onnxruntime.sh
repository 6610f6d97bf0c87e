#!/usr/bin/env bash
# Installs npm's onnxruntime-node (the peer of bench/peers/onnxruntime_run.js) into the npm prefix
# $LENET5_ORT_PREFIX, default ~/.cache/lenet5-cl/onnxruntime-node, where the script and the tests look.
# --ignore-scripts: the package bundles its CPU binding (bin/napi-v6/linux/x64); its install script
# only downloads the CUDA provider, which we do not use. Does nothing when it is already there.
set -euo pipefail
prefix="${LENET5_ORT_PREFIX:-$HOME/.cache/lenet5-cl/onnxruntime-node}"
version="${LENET5_ORT_VERSION:-1.30.0}"
if [[ -f "$prefix/node_modules/onnxruntime-node/package.json" ]]; then
    exit 0
fi
mkdir -p "$prefix"
npm install --prefix "$prefix" --ignore-scripts --no-audit --no-fund "onnxruntime-node@$version" >/dev/null
echo "install_onnxruntime: onnxruntime-node $version in $prefix"
