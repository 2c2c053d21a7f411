#!/usr/bin/env bash
# Installs every dependency of FSDP-MLIR from Debian packages, and the Python
# frontend into a virtual environment. Idempotent: a second run installs nothing
# and takes a few seconds.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

packages=(
  # Build tools and the compiler toolchain.
  cmake ninja-build g++ pkg-config
  # LLVM/MLIR 19 (headers, libMLIR.so, mlir-tblgen, FileCheck, lit).
  llvm-19-dev llvm-19-tools libmlir-19-dev mlir-19-tools
  # ONNX C++ library and its protobuf.
  libonnx-dev libprotobuf-dev protobuf-compiler
  # The runtime's plan format.
  libflatbuffers-dev flatbuffers-compiler
  # CPU collectives and BLAS; zlib (checkpoint checksums).
  libopenmpi-dev openmpi-bin libopenblas-dev libopenblas0-pthread zlib1g-dev
  # Vectorised exp/log/tanh/erf for the CPU kernels (with run-time dispatch).
  libsleef-dev
  # oneDNN: the CPU backend's convolutions and their gradients.
  libdnnl-dev
  # C++ unit tests; clang for the libFuzzer targets; valgrind for the
  # runtime's leak test.
  libgtest-dev clang valgrind
  # Python frontend and the PyTorch oracle.
  python3 python3-venv python3-pip python3-setuptools python3-numpy python3-onnx
  python3-torch python3-torchvision
  # ONNX's backend conformance cases (test/conformance).
  libonnx-testdata
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = installed ] || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${#missing[@]} Debian packages: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    "${missing[@]}"
else
  echo "setup: all ${#packages[@]} Debian packages present"
fi

# The Python frontend lives in a venv that sees Debian's torch/onnx/numpy
# (PEP 668 forbids installing into the system Python).
venv="$root/.venv"
if [ ! -x "$venv/bin/python" ]; then
  echo "setup: creating $venv"
  /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
# (Re)installed when missing or older than its entry points (fsdp-compile).
if ! "$venv/bin/python" -c 'import fsdp_mlir' 2>/dev/null ||
   [ ! -x "$venv/bin/fsdp-compile" ]; then
  echo "setup: installing python-frontend into $venv"
  "$venv/bin/pip" install --quiet --no-build-isolation --no-deps --no-index \
    -e "$root/python-frontend"
fi

# The modern-PyTorch environment (torch 2.x, transformers, onnxruntime; the
# tests labelled torch2), from PyPI, every package pinned in
# scripts/requirements-torch2.txt; reinstalled when the pins change.
# FSDP_NO_TORCH2=1 skips it (about 5 GB): the torch2 tests then say skipped.
venv2="$root/.venv-torch2"
pins="$root/scripts/requirements-torch2.txt"
if [ "${FSDP_NO_TORCH2:-0}" = 1 ]; then
  echo "setup: FSDP_NO_TORCH2=1: not installing $venv2"
else
  want=$(sha256sum "$pins" | cut -d' ' -f1)
  if [ ! -x "$venv2/bin/python" ] ||
     [ "$(cat "$venv2/.fsdp-pins" 2>/dev/null)" != "$want" ]; then
    echo "setup: installing torch 2.x into $venv2 (about 5 GB, a few minutes)"
    [ -x "$venv2/bin/python" ] || /usr/bin/python3 -m venv "$venv2"
    "$venv2/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir \
      -r "$pins"
    echo "$want" > "$venv2/.fsdp-pins"
  else
    echo "setup: $venv2 matches scripts/requirements-torch2.txt"
  fi
  if ! "$venv2/bin/python" -c 'import fsdp_mlir' 2>/dev/null; then
    echo "setup: installing python-frontend into $venv2"
    "$venv2/bin/pip" install --quiet --disable-pip-version-check --no-deps \
      -e "$root/python-frontend"
  fi
fi

if [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "setup: CUDA found at /usr/local/cuda (GPU parts will be built)"
else
  echo "setup: no CUDA at /usr/local/cuda (GPU parts will be skipped)"
fi
echo "setup: done"
