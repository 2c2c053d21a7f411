#!/usr/bin/env bash
# The whole GPU verification, in one call to a lent GPU machine.
#
#   scripts/gpu-check.sh pack [BUILD] [--no-bench]    here: builds the CUDA tests (BUILD:
#       default build/), fsdp-run, libfsdprt and its CUDA backend, and packs
#       them into BUILD/gpu-bundle, under 64 MiB (what one device call
#       carries), with the libraries they need that the GPU machine's image
#       lacks (OpenBLAS, Open MPI: xz) and the training job of
#       test/gpu/gpu_job.py (plans, batch, the CPU's and torch's losses);
#       no weights but copies of the small corpus models' ONNX files; and,
#       unless --no-bench, bench/gpu_train's plans (GPT-2 124M, LLaMA 1B:
#       their weights are made on the GPU machine from the same seed).
#   scripts/gpu-check.sh run [BUNDLE]    on the GPU machine: prints the
#       device and library versions, runs every packed test and
#       compute-sanitizer (memcheck) on the kernel tests, trains the
#       job's plans on the GPU against the CPU's and torch's losses, runs
#       memcheck and racecheck on one training step, runs bench/gpu_train
#       against torch eager and torch.compile, and prints a summary table
#       last, also written to $OUT/summary.md, with every log in
#       $OUT/logs.tar.gz (a device call brings back at most 8 files).
#       Each step has its own time limit, and the whole run ends within
#       FSDP_GPU_CHECK_SECONDS (default 540: a device command's 10 minutes,
#       less the margin to pack the logs); a step cut short says so in the
#       table. FSDP_GPU_CHECK_SKIP="tests training sanitizer bench" leaves
#       out the named steps (a second call that reruns only what failed);
#       FSDP_GPU_BENCH_ONLY="gpt2-124m" benchmarks the models named alone.
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
  local build=$root/build bench=1
  for arg in "$@"; do
    case $arg in
      --no-bench) bench=0 ;;
      *) build=$arg ;;
    esac
  done
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
  # fsdp-run with libfsdprt and the CUDA backend, and the libraries they
  # load that are not glibc's, libstdc++'s or CUDA's (the image has those).
  cmake --build "$build" --target fsdp-run fsdprt fsdprt_cuda fsdp-opt fsdp-translate fsdp-corpus
  local stage=$build/gpu-stage
  rm -rf "$stage"
  mkdir -p "$stage/bin" "$stage/lib"
  cp "$build/bin/fsdp-run" "$stage/bin/"
  cp -L "$build/lib/libfsdprt.so.0" "$build/lib/libfsdprt_cuda.so" "$stage/lib/"
  ldd "$build/bin/fsdp-run" "$build/lib/libfsdprt.so.0" | awk '/=> \// {print $3}' |
    grep -Ev '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
    sort -u | xargs -r -I{} cp -L {} "$stage/lib/"
  tar -C "$stage" -cJf "$bundle/runtime.tar.xz" bin lib
  rm -rf "$stage"
  "${FSDP_PYTHON:-/usr/bin/python3}" "$root/test/gpu/gpu_job.py" make "$build" "$bundle/job"
  cp "$root/test/gpu/gpu_job.py" "$bundle/"
  if (( bench )); then
    # Exporting the 1B model takes minutes: its plans are kept in
    # BUILD/gpu-bench and made again when fsdp-opt or run.py is newer.
    local plans=$build/gpu-bench
    if [ ! -f "$plans/models.json" ] || [ "$build/bin/fsdp-opt" -nt "$plans/models.json" ] ||
       [ "$root/bench/gpu_train/run.py" -nt "$plans/models.json" ]; then
      rm -rf "$plans"
      "${FSDP_PYTHON:-/usr/bin/python3}" "$root/bench/gpu_train/run.py" prepare "$build" "$plans"
    fi
    cp -r "$plans" "$bundle/bench"
  fi
  local bytes
  bytes=$(du -sb "$bundle" | cut -f1)
  if (( bytes > limit )); then
    echo "gpu-check: the bundle is $bytes bytes, over the 64 MiB a call carries" >&2
    exit 1
  fi
  echo "gpu-check: packed ${#tests[@]} tests, fsdp-run and the training job into $bundle ($bytes bytes)"
}

# Seconds a step may take: its own limit, cut to what the run has left.
budget() {
  local left=$(( deadline - SECONDS ))
  (( left < 1 )) && left=1
  echo $(( $1 < left ? $1 : left ))
}

# A step's verdict from its exit status: timeout's 124 and 137 say the
# limit cut it short.
verdict() {
  case $1 in
    0) echo "${2:-passed}" ;;
    124|137) echo "FAILED: cut short at its time limit (exit $1)${3:+: $3}" ;;
    *) echo "FAILED (exit $1)${3:+: $3}" ;;
  esac
}

skipped() { [[ " ${FSDP_GPU_CHECK_SKIP:-} " == *" $1 "* ]]; }

run() {
  local bundle=${1:-$root/build/gpu-bundle}
  local final=${OUT:-$bundle/out}
  # Logs go to a scratch folder, packed into one archive at the end.
  local out
  out=$(mktemp -d /tmp/gpu-check.XXXXXX)
  mkdir -p "$final"
  deadline=$(( SECONDS + ${FSDP_GPU_CHECK_SECONDS:-540} ))
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
    skipped tests && break
    local log=$out/$t.log status
    case $t in
      # The real device's cuDNN description (docs/gpu.md, "cuDNN without a
      # device"; runtime/backends/cuda/devices/ keeps the H100's and H200's).
      fsdp-cudnn-capture-device)
        timeout -k 5 "$(budget 60)" "$bundle/$t" "$out/h100-captured.json" > "$log" 2>&1 ;;
      # The deviceless checks against the captured description, and with the
      # real driver loaded.
      fsdprt-cudnn-deviceless-test)
        FSDP_CUDNN_DEVICE=$out/h100-captured.json timeout -k 5 "$(budget 90)" \
          "$bundle/$t" > "$log" 2>&1 ;;
      *) timeout -k 5 "$(budget 120)" "$bundle/$t" > "$log" 2>&1 ;;
    esac
    status=$?
    case $status in
      0) result="passed: $(tail -1 "$log")" ;;
      77) result="$(tail -1 "$log")" ; failed=1 ;;
      *) result=$(verdict $status "" "$(grep -m1 FAIL "$log" || tail -1 "$log")"); failed=1 ;;
    esac
    echo "| $t | $result |" >> "$table"
  done
  # Training on the GPU: the job's plans against the CPU's and torch's
  # losses; then memcheck on one training step.
  local runtime=/tmp/fsdp-gpu-runtime
  rm -rf "$runtime" && mkdir -p "$runtime"
  # Python's lzma where the image's tar has no xz.
  tar -C "$runtime" -xJf "$bundle/runtime.tar.xz" 2> /dev/null ||
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
      "$bundle/runtime.tar.xz" "$runtime"
  export LD_LIBRARY_PATH=$runtime/lib:$LD_LIBRARY_PATH
  local log=$out/training.log status
  if ! skipped training; then
    PYTHONUNBUFFERED=1 timeout -k 5 "$(budget 180)" \
      python3 "$bundle/gpu_job.py" compare "$bundle/job" "$runtime/bin/fsdp-run" > "$log" 2>&1
    status=$?
    while IFS= read -r line; do
      echo "| training ${line%%:*} | ${line#*: } |" >> "$table"
    done < <(grep -E '^[a-z0-9]+-(fp32|bf16)[a-z0-9-]*:' "$log")
    [ $status = 0 ] || { failed=1
      echo "| training | $(verdict $status "" "$(tail -1 "$log")") |" >> "$table"; }
  fi
  local sanitizer=1
  command -v compute-sanitizer > /dev/null || {
    sanitizer=0; echo "| compute-sanitizer | not found |" >> "$table"; }
  if (( sanitizer )) && ! skipped sanitizer; then
    # memcheck and racecheck on one GPT-2 training step (fp32: the own
    # attention and reduction kernels, which use shared memory).
    for tool in memcheck racecheck; do
      local step=$out/sanitizer-$tool-training.log
      (cd "$bundle/job" && timeout -k 5 "$(budget 90)" compute-sanitizer --tool "$tool" \
        --error-exitcode 9 "$runtime/bin/fsdp-run" gpt2-fp32.plan --model-dir weights \
        --input input_ids=gpt2.input_ids.npy --input labels=gpt2.labels.npy --lr 0.01 \
        --steps 1 --device cuda --no-cuda-graph) > "$step" 2>&1
      status=$?
      echo "| compute-sanitizer $tool, one GPT-2 step | $(verdict $status clean \
        "$(grep -m1 -E 'ERROR|Invalid|hazard|error' "$step")") |" >> "$table"
      [ $status = 0 ] || failed=1
    done
  fi
  # The benchmark (bench/gpu_train): its own table, under the summary's.
  if [ -f "$bundle/bench/models.json" ] && ! skipped bench; then
    PYTHONUNBUFFERED=1 timeout -k 5 "$(budget 240)" python3 "$root/bench/gpu_train/run.py" \
      run "$bundle/bench" "$runtime/bin/fsdp-run" ${FSDP_GPU_BENCH_ONLY:+--only $FSDP_GPU_BENCH_ONLY} \
      > "$out/bench.log" 2>&1
    status=$?
    echo "| bench/gpu_train | $(verdict $status "ran: its table follows" \
      "$(tail -1 "$out/bench.log")") |" >> "$table"
  fi
  if (( sanitizer )) && ! skipped sanitizer; then
    # memcheck on the kernel tests (racecheck there outruns any limit:
    # sizes up to 5M elements).
    local log=$out/sanitizer-memcheck-kernels.log
    timeout -k 5 "$(budget 120)" compute-sanitizer --tool memcheck --error-exitcode 9 \
      "$bundle/fsdprt-cuda-device-tests" > "$log" 2>&1
    status=$?
    echo "| compute-sanitizer memcheck, kernel tests | $(verdict $status clean \
      "$(grep -m1 -E 'ERROR|Invalid|FAIL' "$log")") |" >> "$table"
    [ $status = 0 ] || failed=1
  fi
  if [ -f "$out/bench.log" ]; then
    # Its tables, as far as it got (it prints each row as it is measured).
    { echo; sed -n '/^| model | side/,$p' "$out/bench.log" | grep -E '^(\||$)'; } >> "$table"
  fi
  cp "$table" "$final/summary.md"
  tar -C "$out" -czf "$final/logs.tar.gz" .
  echo
  cat "$table"
  return $failed
}

case $mode in
  pack) shift; pack "$@" ;;
  run) shift; run "$@" ;;
  *) sed -n '2,31p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
