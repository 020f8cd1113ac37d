#!/usr/bin/env bash
# Run GPU evidence stages on a GPU box in one call, each under its own time limit, and pack
# every output into $OUT/evidence.tgz. Usage (from the repository root on the GPU box):
#   bash benchmarks/run_on_gpu.sh "replay:200:--only lecture06-gelu,lecture06-softmax" "engine:90:--quick" ...
# Each argument is STAGE:LIMIT_S[:EXTRA ARGS]; a stage may appear twice (its table and log are
# kept per argument). The pseudo-stage `tmux:LIMIT_S[:SESSION RUN_WAIT_S]` runs
# benchmarks/tmux_try.sh (the TUI in a real terminal, screens captured to tmux/); `tmuxwatch:LIMIT_S[:M N DTYPE]`
# runs benchmarks/tmux_watch.sh (watch mode at 80x24 on the RMSNorm example, captured to tmuxwatch/).
# Wheels for the TUI (textual, plotext, ...) are installed from .whl/ when that folder exists
# (the box has no package registry).
set -u
OUT=${OUT:-$PWD/evidence-out}
EV=/tmp/ev
mkdir -p "$EV" "$OUT"
# (the project's own wheel, kernel_workbench-*.whl, is left out: on PYTHONPATH it would shadow the
# checkout; the `wheel` stage installs it into a venv of its own)
if [ -d .whl ]; then
  deps=$(ls .whl/*.whl | grep -v '/kernel_workbench-')
  [ -n "$deps" ] && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site $deps && export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | grep -v -i warn
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv > "$EV/nvidia-smi.txt"
# the Python processes every 10 s (state, wait channel, kernel stack when stuck, lock files,
# worker log tails): what a hung row looks like from outside
bash benchmarks/proc_watch.sh "$EV/procwatch.txt" 10 &
WATCH=$!
trap 'kill $WATCH 2>/dev/null' EXIT
i=0
for spec in "$@"; do
  i=$((i + 1))
  IFS=: read -r stage limit extra <<< "$spec"
  echo "### stage $stage (limit ${limit}s) $extra" | tee -a "$EV/summary.txt"
  start=$(date +%s)
  log="$EV/$i-$stage.txt"
  if [ "$stage" = tmux ] || [ "$stage" = tmuxwatch ]; then
    script=benchmarks/tmux_try.sh
    [ "$stage" = tmuxwatch ] && script=benchmarks/tmux_watch.sh
    # shellcheck disable=SC2086
    timeout -k 10 "$limit" bash "$script" "$EV/$stage" $extra > "$log" 2>&1
    echo "rc=$? wall=$(( $(date +%s) - start ))s" | tee -a "$EV/summary.txt"
    cat "$log" >> "$EV/summary.txt"
    tar czf "$OUT/evidence.tgz" -C /tmp ev
    continue
  fi
  # shellcheck disable=SC2086
  timeout -s INT -k 20 "$limit" python3 benchmarks/gpu_evidence.py --stage "$stage" --out "$EV/$stage" $extra \
    > "$log" 2>&1
  echo "rc=$? wall=$(( $(date +%s) - start ))s" | tee -a "$EV/summary.txt"
  sed -n '/^== /,$p' "$log" >> "$EV/summary.txt"
  tar czf "$OUT/evidence.tgz" -C /tmp ev  # after every stage: a call cut short still brings back what finished
done
tar czf "$OUT/evidence.tgz" -C /tmp ev
cat "$EV/summary.txt"
