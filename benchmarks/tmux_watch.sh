#!/usr/bin/env bash
# Try watch mode as a person would: the TUI on the RMSNorm example at 80x24 in tmux, its kernel
# edited "in another window" (sed), and keep what the screen showed after each save.
# Usage (repository root; on the GPU box after run_on_gpu.sh has installed the wheels):
#   bash benchmarks/tmux_watch.sh OUT_DIR [M N DTYPE]      e.g. ... /tmp/watch 16384 8192 bfloat16
# Copies examples/rmsnorm.{py,yaml} to OUT_DIR/work (the repository is never edited), sets the
# run's shape and dtype when given, opens `$PY -m workbench OUT_DIR/work/rmsnorm.yaml --watch`
# (PY defaults to python3) in an 80x24 tmux window and, after the first run:
#   1. a good edit (num_warps 4 -> 8 for rows under 2048, else 8 -> 16): the Log pane's line
#      for `triton` shows the time, GB/s and PTX counts against the previous result;
#   2. a kernel that no longer compiles (an undefined name): path:line in the Log, the last
#      good result still in the Timing pane;
#   3. a file that does not import (a syntax error): path:line, "nothing re-ran";
#   4. the original restored: it runs again.
# Every capture is OUT_DIR/NN-what.txt; OUT_DIR/timeline.txt has the edit-to-result times
# (polled every 0.2 s: from the save to the re-run row's line on screen, or to the run's end,
# seen as the session's results file rewritten).
set -u
OUT_DIR=${1:?usage: tmux_watch.sh OUT_DIR [M N DTYPE]}
M=${2:-}; N=${3:-}; DTYPE=${4:-}
PY=${PY:-python3}
WAIT_S=${WAIT_S:-300}
mkdir -p "$OUT_DIR/work"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
WORK=$OUT_DIR/work
rm -f "$WORK"/rmsnorm.results.json*
cp examples/rmsnorm.py "$WORK/rmsnorm.py"
cp examples/rmsnorm.py "$WORK/rmsnorm.py.orig"
cp examples/rmsnorm.yaml "$WORK/rmsnorm.yaml"
if [ -n "$M" ]; then
  sed -i "s/shape: {M: [0-9]*, N: [0-9]*}/shape: {M: $M, N: $N}/; s/dtype: float32/dtype: $DTYPE/" "$WORK/rmsnorm.yaml"
fi
export XDG_DATA_HOME=$OUT_DIR/xdg-data
T=wbwatch
n=0
snap() {  # snap NAME: capture the visible pane to OUT_DIR/NN-NAME.txt
  n=$((n + 1))
  tmux capture-pane -p -t "$T" > "$OUT_DIR/$(printf %02d $n)-$1.txt" 2>&1
}
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
RESULTS=$WORK/rmsnorm.results.json  # the TUI writes it after every run
stamp() { date -r "$RESULTS" +%s%N 2>/dev/null || echo 0; }
wait_screen() {  # wait_screen PATTERN: until the visible screen shows PATTERN
  local start; start=$(date +%s)
  until tmux capture-pane -p -t "$T" | grep -q -- "$1"; do
    sleep 0.2
    [ $(( $(date +%s) - start )) -ge "$WAIT_S" ] && { echo "timed out waiting for '$1'" >> "$OUT_DIR/timeline.txt"; return 1; }
  done
  return 0
}
wait_run() {  # wait_run STAMP: until a run has ended after STAMP (its results file rewritten)
  local start; start=$(date +%s)
  while [ "$(stamp)" = "$1" ]; do
    sleep 0.2
    [ $(( $(date +%s) - start )) -ge "$WAIT_S" ] && { echo "timed out waiting for a run to end" >> "$OUT_DIR/timeline.txt"; return 1; }
  done
  return 0
}
tmux kill-session -t "$T" 2>/dev/null
tmux new-session -d -s "$T" -x 80 -y 24 \
  "cd '$PWD' && PYTHONPATH='${PYTHONPATH:-}' XDG_DATA_HOME='$XDG_DATA_HOME' $PY -m workbench '$WORK/rmsnorm.yaml' --watch; echo EXIT=\$? > '$OUT_DIR/exit.txt'; sleep 5"
: > "$OUT_DIR/timeline.txt"
sleep 2
snap first-frame
t0=$(now_ms)
wait_run 0
echo "first run (watch mode starts it): $(( $(now_ms) - t0 )) ms" >> "$OUT_DIR/timeline.txt"
sleep 1
snap first-run-timing
tmux send-keys -t "$T" 5; sleep 1; snap first-run-log

edit() {  # edit NAME SED_EXPR PATTERN: save an edit on the Log pane, time it until PATTERN shows
  local before t; before=$(stamp)
  sed -i "$2" "$WORK/rmsnorm.py"
  t=$(now_ms)
  wait_screen "$3" && echo "$1: save -> '$3' on screen: $(( $(now_ms) - t )) ms" >> "$OUT_DIR/timeline.txt"
  [ "$1" = import-error ] || wait_run "$before"
  sleep 1
  snap "$1-log"
  tmux send-keys -t "$T" 1; sleep 1; snap "$1-timing"
  tmux send-keys -t "$T" 5; sleep 0.5
}
edit good-edit 's/return block, 4 if block < 2048 else 8 if/return block, 8 if block < 2048 else 16 if/' "triton: .* -> "
edit compile-error 's/    y = x \* (1.0/    y = undefined_name + x * (1.0/' "edit failed"
edit import-error 's/^EPS = 1e-6 /EPS = = 1e-6 /' "nothing re-ran"
before=$(stamp)
cp "$WORK/rmsnorm.py.orig" "$WORK/rmsnorm.py"
t=$(now_ms)
wait_run "$before" && echo "restored: save -> the run's end: $(( $(now_ms) - t )) ms" >> "$OUT_DIR/timeline.txt"
sleep 1; snap restored-log
tmux send-keys -t "$T" 1; sleep 1; snap restored-timing
tmux send-keys -t "$T" q; sleep 1; tmux send-keys -t "$T" y; sleep 2
tmux kill-session -t "$T" 2>/dev/null
cat "$OUT_DIR/timeline.txt"
