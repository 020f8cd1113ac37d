#!/usr/bin/env bash
# One call's GPU evidence for a GPU kind (about 9 minutes): this kind's results page
# (results/<kind>.md and .json: every shipped implementation against copy or cuBLAS, the GEMM
# targets), `workbench --doctor` (the device-keyed tuning cache it filled), then GPU stages, each
# under its own time limit (benchmarks/run_on_gpu.sh). Run from the checkout on the GPU box, with
# the wheels run_on_gpu.sh installs in .whl/ (the TUI's, cxxfilt, liger_kernel and the project's):
#   bash benchmarks/evidence_all.sh h100 "wheel:70:--quick" "fp8:90:--quick" ...
# The page and the doctor's output land in $OUT beside run_on_gpu.sh's evidence.tgz.
set -u
kind=$1; shift
OUT=${OUT:-$PWD/evidence-out}
mkdir -p "$OUT"
# the page warms builds for up to 60 s first, then times rows for PAGE_S - 90 s (its budget)
PAGE_S=${PAGE_S:-210}
if [ -d .whl ]; then
  deps=$(ls .whl/*.whl | grep -v '/kernel_workbench-')
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $deps \
    && export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | grep -v -i warn
export PYTHONUNBUFFERED=1
start=$(date +%s)
timeout -s INT -k 20 "$PAGE_S" python3 benchmarks/kernels_table.py --run --quick --budget-s $((PAGE_S - 90)) \
  --out "$OUT/$kind.md" > "$OUT/page-$kind.log" 2>&1
echo "page: rc=$? wall=$(( $(date +%s) - start ))s"
python3 -m workbench --doctor > "$OUT/doctor-$kind.txt" 2>&1
bash benchmarks/run_on_gpu.sh "$@"
