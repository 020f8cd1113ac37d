#!/usr/bin/env bash
# kernels/_ws_gemm.py on a Hopper GPU, each step in its own process under a time limit (a fault
# or a hang costs one step): one config at 4096^3 (both consumers busy), then the check over
# shapes and configs, then the timing against cuBLAS and the TMA kernel (benchmarks/ws_probe.py).
# Usage: OUT=dir bash benchmarks/ws_diag.sh [--quick]
set -u
export PYTHONPATH=.
OUT=${OUT:-/tmp/wsdiag}
mkdir -p "$OUT"
step() {  # name timeout args...
  local name=$1 limit=$2; shift 2
  echo "### $name" >> "$OUT/ws.txt"
  timeout -k 5 "$limit" python3 benchmarks/ws_probe.py "$@" >> "$OUT/ws.txt" 2>&1
  local rc=$?
  echo "rc=$rc" >> "$OUT/ws.txt"
  return $rc
}
step two-consumers-4096 60 diag '{"CONSUMERS": 2}' 4096 none \
  && step two-consumers-4096-gelu 60 diag '{"CONSUMERS": 2}' 4096 gelu \
  && step check 150 check ${1:-} \
  && step time 240 time "$OUT/ws.json" ${1:-}
grep -v "^  \|^Traceback\|^    " "$OUT/ws.txt" | tail -60
