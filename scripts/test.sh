#!/usr/bin/env bash
# Sets up, builds and runs every test: lit, C/C++ unit tests, the Python
# frontend's tests (ctest drives them all). GPU tests report "skipped" where
# there is no GPU. Build directory: $FSDP_BUILD_DIR (default build/).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${FSDP_BUILD_DIR:-$root/build}
jobs=$(nproc)

bash "$root/scripts/setup.sh"

start=$(date +%s)
cmake -G Ninja -S "$root" -B "$build"
cmake --build "$build" -j "$jobs"
echo "test.sh: configure + build took $(( $(date +%s) - start )) s"

ctest --test-dir "$build" --output-on-failure -j "$jobs"
