# Sourced by the scripts that run from a GPU bundle (bench/gpu/make_gpu_bundle.sh's folder) on a lent
# GPU machine: enters the bundle, puts its libraries on the loader's path, and registers NVIDIA's
# OpenCL driver (those machines have it, unregistered).
#   source "$(dirname "$(realpath "$0")")/bundle_env.sh" BUNDLE_DIR
cd "${1:?bundle_env.sh: no bundle folder given}" || exit 1
export LD_LIBRARY_PATH=$PWD/lib
mkdir -p /etc/OpenCL/vendors
[ -f /etc/OpenCL/vendors/nvidia.icd ] || echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
