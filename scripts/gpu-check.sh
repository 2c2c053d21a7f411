#!/usr/bin/env bash
# The whole GPU verification, in one call to a lent GPU machine.
#
#   scripts/gpu-check.sh pack [BUILD]    here: builds the CUDA tests (BUILD:
#       default build/) and packs them into BUILD/gpu-bundle, under 64 MiB
#       (what one device call carries); no weights.
#   scripts/gpu-check.sh run [BUNDLE]    on the GPU machine: prints the
#       device and library versions, runs every packed test and
#       compute-sanitizer (memcheck, racecheck) on the kernel tests, and
#       prints a summary table last, also written to $OUT/summary.md.
#
# From a session with a GPU (docs/gpu.md):
#   scripts/gpu-check.sh pack
#   device run: command "scripts/gpu-check.sh run build/gpu-bundle",
#               carry ["build/gpu-bundle"]
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mode=${1:-}
limit=$((64 * 1024 * 1024))
tests=(fsdp-cuda-smoke fsdprt-cuda-device-tests fsdp-cudnn-capture-device
       fsdprt-cudnn-deviceless-test)

pack() {
  local build=${1:-$root/build}
  set -e
  cmake --build "$build" --target "${tests[@]}"
  local bundle=$build/gpu-bundle
  rm -rf "$bundle"
  mkdir -p "$bundle"
  for t in "${tests[@]}"; do
    cp "$(find "$build" -type f -name "$t" -perm -u+x | head -1)" "$bundle/"
  done
  cp "$root/scripts/gpu-check.sh" "$bundle/"
  git -C "$root" rev-parse HEAD > "$bundle/commit" 2>/dev/null || true
  local bytes
  bytes=$(du -sb "$bundle" | cut -f1)
  if (( bytes > limit )); then
    echo "gpu-check: the bundle is $bytes bytes, over the 64 MiB a call carries" >&2
    exit 1
  fi
  echo "gpu-check: packed ${#tests[@]} tests into $bundle ($bytes bytes)"
}

run() {
  local bundle=${1:-$root/build/gpu-bundle}
  local out=${OUT:-$bundle/out}
  mkdir -p "$out"
  # The image's CUDA libraries: the toolkit's, then the pip wheels'.
  local libs=/usr/local/cuda/lib64
  for d in $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, d, "lib") for p in nvidia.__path__ for d in os.listdir(p)))' 2>/dev/null); do
    libs=$libs:$d
  done
  export LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  local table=$out/summary.md
  {
    echo "| check | result |"
    echo "| --- | --- |"
    echo "| commit | $(cat "$bundle/commit" 2>/dev/null || echo unknown) |"
    echo "| device | $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo 'nvidia-smi failed') |"
    echo "| nvcc | $(nvcc --version 2>/dev/null | tail -1) |"
    echo "| torch | $(python3 -c 'import torch; print(torch.__version__, torch.version.cuda)' 2>/dev/null) |"
    echo "| cuDNN, NCCL wheels | $(python3 -m pip list 2>/dev/null | grep -Ei 'nvidia-(cudnn|nccl)' | tr -s ' ' | tr '\n' ';') |"
  } > "$table"
  local failed=0
  for t in "${tests[@]}"; do
    local log=$out/$t.log status
    case $t in
      # The real device's cuDNN description (docs/gpu.md, "cuDNN without a
      # device"): commit it as runtime/backends/cuda/devices/h100.json.
      fsdp-cudnn-capture-device) "$bundle/$t" "$out/h100-captured.json" > "$log" 2>&1 ;;
      # The deviceless checks against the captured description, and with the
      # real driver loaded.
      fsdprt-cudnn-deviceless-test)
        FSDP_CUDNN_DEVICE=$out/h100-captured.json "$bundle/$t" > "$log" 2>&1 ;;
      *) "$bundle/$t" > "$log" 2>&1 ;;
    esac
    status=$?
    case $status in
      0) result="passed: $(tail -1 "$log")" ;;
      77) result="$(tail -1 "$log")" ; failed=1 ;;
      *) result="FAILED (exit $status): $(grep -m1 FAIL "$log" || tail -1 "$log")"; failed=1 ;;
    esac
    echo "| $t | $result |" >> "$table"
  done
  if command -v compute-sanitizer > /dev/null; then
    for tool in memcheck racecheck; do
      local log=$out/sanitizer-$tool.log
      compute-sanitizer --tool "$tool" --error-exitcode 9 \
        "$bundle/fsdprt-cuda-device-tests" > "$log" 2>&1
      local status=$?
      echo "| compute-sanitizer $tool | $([ $status = 0 ] && echo clean || echo "FAILED (exit $status): $(grep -m1 -E 'ERROR|Invalid|hazard' "$log")") |" >> "$table"
      [ $status = 0 ] || failed=1
    done
  else
    echo "| compute-sanitizer | not found |" >> "$table"
  fi
  echo
  cat "$table"
  return $failed
}

case $mode in
  pack) shift; pack "$@" ;;
  run) shift; run "$@" ;;
  *) sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
