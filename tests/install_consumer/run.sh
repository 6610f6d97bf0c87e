#!/usr/bin/env bash
# ctest's install_consumer: installs the build into a temporary prefix, checks what
# landed there, then configures, builds and runs the consumer project beside this
# script against it.   run.sh <cmake> <build folder> <C++ compiler>
set -euo pipefail
trap 'echo "install_consumer: failed at line $LINENO of $0"' ERR
cmake=$1 build=$2 cxx=$3
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lenet5_install_XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

"$cmake" --install "$build" --prefix "$prefix" >/dev/null
"$prefix/bin/lenet5" --version | grep -E "^build: OpenCL (yes|no), SIMD .*, OpenMP (yes|no), OpenBLAS (yes|no), CLBlast (yes|no), MPI (yes|no), ONNX (yes|no)$"
if [ -d "$here/../../models" ]; then ls "$prefix"/share/lenet5/models/*.net >/dev/null; fi
ls "$prefix"/lib*/cmake/lenet5/lenet5Config.cmake "$prefix"/lib*/cmake/lenet5/lenet5ConfigVersion.cmake >/dev/null

"$cmake" -S "$here" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_BUILD_TYPE=Release >/dev/null
"$cmake" --build "$tmp/build" >/dev/null
"$tmp/build/consumer"
