#!/usr/bin/env bash
# Sets up, builds fsdp-opt and runs the main job on the bundled example: a
# small GPT-2-style model (examples/export_gpt.py) exported by torch, imported,
# wrapped one unit per transformer block as PyTorch FSDP would, and laid out
# as flat parameters sharded over 4 ranks. Prints the module tree and each
# unit's layout. Build directory: $FSDP_BUILD_DIR (default build/).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${FSDP_BUILD_DIR:-$root/build}
work=$build/demo
opt=$build/bin/fsdp-opt

bash "$root/scripts/setup.sh"
cmake -G Ninja -S "$root" -B "$build" > /dev/null
cmake --build "$build" -j "$(nproc)" --target fsdp-opt
mkdir -p "$work"

echo
echo "== export: examples/export_gpt.py (torch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)'))"
/usr/bin/python3 "$root/examples/export_gpt.py" "$work/gpt.onnx" 2> "$work/export.log"

echo
echo "== fsdp-opt gpt.onnx --batch-size=4 --fsdp-print-module-tree"
"$opt" "$work/gpt.onnx" --batch-size=4 --fsdp-print-module-tree -o /dev/null

echo
echo "== fsdp-opt gpt.onnx --batch-size=4 --fsdp-auto-wrap=\"policy=transformer layer-classes=Block\" --fsdp-flatten=world-size=4"
"$opt" "$work/gpt.onnx" --batch-size=4 \
  --fsdp-auto-wrap="policy=transformer layer-classes=Block" \
  --fsdp-flatten=world-size=4 --fsdp-print-layout=ranks=0,3 \
  --fsdp-layout-json="$work/layout.json" -o "$work/gpt.fsdp.mlir"

echo
echo "demo: ok: $(grep -c 'fsdp.param @' "$work/gpt.fsdp.mlir") parameters in" \
     "$(grep -c 'fsdp.flat_param @' "$work/gpt.fsdp.mlir") units; IR in $work/gpt.fsdp.mlir," \
     "layout in $work/layout.json"
