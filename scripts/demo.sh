#!/usr/bin/env bash
# Sets up, builds fsdp-opt and runs the main job on the bundled example: a
# tiny GPT's parameters grouped into FSDP units and sharded over 4 ranks.
# Prints every unit's flat layout and the pieces each rank owns.
# Build directory: $FSDP_BUILD_DIR (default build/).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${FSDP_BUILD_DIR:-$root/build}
example=$root/examples/tiny_gpt.mlir

bash "$root/scripts/setup.sh"
cmake -G Ninja -S "$root" -B "$build" > /dev/null
cmake --build "$build" -j "$(nproc)" --target fsdp-opt

echo
echo "== fsdp-opt $example --fsdp-print-layout"
"$build/bin/fsdp-opt" "$example" --fsdp-print-layout -o /dev/null
echo
echo "demo: ok ($(grep -c '^fsdp.param' "$example") parameters in" \
     "$(grep -c '^fsdp.flat_param' "$example") units verified and laid out)"
