#!/usr/bin/env bash
# Checks the shared runtime library's contract with its hosts:
#  - every dynamic symbol it defines is part of the C API (fsdprt_*), so hosts
#    never clash with the runtime's C++ internals;
#  - it needs neither MLIR/LLVM nor protobuf, nor any CUDA library.
set -euo pipefail
lib=$1
symbols=$(nm -D --defined-only "$lib" | awk '{print $3}')
[ -n "$symbols" ] || { echo "FAIL: no exported symbols in $lib"; exit 1; }
bad=$(printf '%s\n' "$symbols" | grep -v '^fsdprt_' || true)
if [ -n "$bad" ]; then
  echo "FAIL: symbols outside the C API exported from $lib:"
  printf '  %s\n' $bad
  exit 1
fi
echo "ok: $(printf '%s\n' "$symbols" | wc -l) symbols exported, all fsdprt_*"

needed=$(readelf -d "$lib" | awk '/NEEDED/ {print $5}' | tr -d '[]')
# CUDA's libraries too: the CUDA backend's device is a plugin
# (libfsdprt_cuda.so) that the library loads only for device cuda.
forbidden=$(printf '%s\n' "$needed" | grep -Ei 'mlir|llvm|protobuf|cuda|cublas|cudnn|nccl' || true)
if [ -n "$forbidden" ]; then
  echo "FAIL: $lib depends on $forbidden"
  exit 1
fi
echo "ok: needs only" $needed
