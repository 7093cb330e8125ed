#!/usr/bin/env bash
# Builds corun against the CUDA-enabled libtorch of a pip PyTorch and runs a short co-run on
# the GPU (the torch-cuda testbed) and on the CPU (torch-cpu). Needs python3 with torch
# (CUDA build), a GPU and the Debian build dependencies (scripts/install-deps.sh).
# Usage: scripts/gpu-check.sh [BUILD_DIR]   (default build/gpu-check)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/gpu-check}
prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' ||
  { echo "gpu-check: this PyTorch sees no CUDA device" >&2; exit 1; }
# pip wheels are built with the pre-C++11 string ABI on some versions: match it.
abi=$(python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_CXX_FLAGS="-D_GLIBCXX_USE_CXX11_ABI=$abi" -DCORUN_BUILD_TESTS=OFF
cmake --build "$build" --target corun -j"$(nproc)"
export LD_LIBRARY_PATH="$prefix/../../lib:${LD_LIBRARY_PATH:-}"
"$build/corun" measure workloads/cpu-n4.yaml --testbed torch-cuda --window 2 --json
"$build/corun" measure workloads/cpu-n4.yaml --testbed torch-cpu --window 2 --json
