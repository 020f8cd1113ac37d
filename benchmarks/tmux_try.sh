#!/usr/bin/env bash
# Try the TUI as a person would, in a real terminal (tmux), and keep what the screen showed.
# Usage (repository root; on the GPU box after run_on_gpu.sh has installed the wheels):
#   bash benchmarks/tmux_try.sh OUT_DIR [SESSION] [RUN_WAIT_S]
# Opens `python3 -m workbench SESSION` (default: the default session) in a 200x50 tmux window,
# captures the first frame, presses r (run the selected run) and captures the screen every 10 s
# while it runs (so a frozen screen would show), presses a key mid-run to see it answered, visits
# each pane (1..5), shrinks the window to 80x24, saves with ctrl+s, quits with q (answering y
# when it asks because a run is still active). Every capture is OUT_DIR/NN-what.txt; the
# session's autosave and the saved file land under OUT_DIR/xdg-data (XDG_DATA_HOME).
# Issue #17's evidence: the results table scrolled column by column at 80x24 (every column
# reachable), the Profile pane's shortened kernel names with one whole name (enter), and the
# focused pane (a heavy border in the .txt captures; colours too in the NN-what.ansi ones).
set -u
OUT_DIR=${1:?usage: tmux_try.sh OUT_DIR [SESSION] [RUN_WAIT_S]}
SESSION=${2:-}
RUN_WAIT_S=${3:-90}
mkdir -p "$OUT_DIR"
export XDG_DATA_HOME=$OUT_DIR/xdg-data  # the autosave and saved session land here (platformdirs)
T=wbtry
n=0
snap() {  # snap NAME: capture the visible pane to OUT_DIR/NN-NAME.txt
  n=$((n + 1))
  tmux capture-pane -p -t "$T" > "$OUT_DIR/$(printf %02d $n)-$1.txt" 2>&1
}
snap_colour() {  # snap_colour NAME: the same with colours and attributes (escape sequences)
  n=$((n + 1))
  tmux capture-pane -p -e -t "$T" > "$OUT_DIR/$(printf %02d $n)-$1.ansi" 2>&1
}
tmux kill-session -t "$T" 2>/dev/null
tmux new-session -d -s "$T" -x 200 -y 50 \
  "cd '$PWD' && PYTHONPATH='${PYTHONPATH:-}' XDG_DATA_HOME='$XDG_DATA_HOME' python3 -m workbench $SESSION; echo EXIT=\$? > '$OUT_DIR/exit.txt'; sleep 5"
t0=$(date +%s%N)
for _ in $(seq 1 40); do  # first frame: poll every 0.1 s for the footer
  sleep 0.1
  tmux capture-pane -p -t "$T" | grep -q "Run" && break
done
echo "first frame after $(( ($(date +%s%N) - t0) / 1000000 )) ms (polled every 0.1 s)" > "$OUT_DIR/timeline.txt"
snap first-frame
tmux send-keys -t "$T" r   # pressed on the first frame: runs as soon as the session is open
start=$(date +%s)
sleep 3
snap run-started
tmux send-keys -t "$T" 3   # a key press mid-run: the PTX pane should come up at once
sleep 1
snap mid-run-ptx
tmux send-keys -t "$T" 1
while [ $(( $(date +%s) - start )) -lt "$RUN_WAIT_S" ]; do
  sleep 10
  snap "running-$(( $(date +%s) - start ))s"
  tmux capture-pane -p -t "$T" | grep -q "done: \|cancelled: \|run failed" && break
done
echo "run watched for $(( $(date +%s) - start )) s" >> "$OUT_DIR/timeline.txt"
for pane in 1 2 3 4 5; do
  tmux send-keys -t "$T" "$pane"
  sleep 1
  snap "pane-$pane"
done
tmux send-keys -t "$T" 3 n
sleep 1
snap ptx-next-highlight
tmux send-keys -t "$T" v   # the PTX pane's split view (v, n, d, s): kernel source | PTX, line to line
sleep 1.5
snap ptx-split
tmux send-keys -t "$T" n   # the next source line with loads, shuffles or mma: its PTX marked
sleep 1
snap ptx-split-next
tmux send-keys -t "$T" d   # compare with the same kernel at another sweep point (lecture06-softmax-1000)
sleep 1.5
snap ptx-split-diff
tmux send-keys -t "$T" s   # the right-hand stage cycles (PTX -> SASS for Triton)
sleep 1.5
snap ptx-split-stage
tmux send-keys -t "$T" v
sleep 0.5
tmux send-keys -t "$T" 2     # Profile: the second kernel row highlighted, its whole name below
sleep 1
tmux send-keys -t "$T" j
sleep 1
snap profile-kernel-names
snap_colour profile-focused-pane
tmux send-keys -t "$T" Enter  # the highlighted kernel's whole name in a dialog
sleep 1
snap profile-whole-kernel-name
tmux send-keys -t "$T" Escape
sleep 0.5
tmux send-keys -t "$T" Tab    # focus moves on: the border that is heavy moves with it
sleep 0.5
snap focus-moved-by-tab
tmux resize-window -t "$T" -x 80 -y 24 2>/dev/null || tmux resize-pane -t "$T" -x 80 -y 24
sleep 1.5
tmux send-keys -t "$T" 1
sleep 1
snap small-80x24-timing
snap_colour small-80x24-timing-focused
for step in 1 2 3 4; do  # every column reachable: l scrolls past impl/status/median/spread
  tmux send-keys -t "$T" l l l
  sleep 0.7
  snap "small-80x24-results-scrolled-$step"
done
tmux send-keys -t "$T" 2
sleep 1
tmux send-keys -t "$T" j
sleep 1
snap small-80x24-profile-kernel-names
tmux send-keys -t "$T" e     # the spec editor takes the lists' place at 80 columns
sleep 1
snap small-80x24-spec-editor
tmux send-keys -t "$T" Escape
sleep 0.5
tmux send-keys -t "$T" 1
tmux send-keys -t "$T" b
sleep 1
snap small-80x24-no-sidebar
tmux send-keys -t "$T" 3
sleep 1
tmux send-keys -t "$T" v n   # the split view at 80x24: source above the stage
sleep 1.5
snap small-80x24-ptx-split
tmux send-keys -t "$T" v 1
sleep 0.5
tmux send-keys -t "$T" '?'
sleep 1
snap small-80x24-help
tmux send-keys -t "$T" Escape
tmux resize-window -t "$T" -x 200 -y 50 2>/dev/null
sleep 1
tmux send-keys -t "$T" C-s
sleep 2
snap saved
tmux send-keys -t "$T" q
sleep 1.5
snap quit-asked
tmux send-keys -t "$T" y
sleep 4
snap after-quit
tmux kill-session -t "$T" 2>/dev/null
sleep 2  # quitting mid-run must leave no engine child behind
{ pgrep -af "workbench" | grep -v -e pgrep -e tmux_try -e run_on_gpu || echo "no workbench process left after quit"; } >> "$OUT_DIR/timeline.txt"
ls "$OUT_DIR" >> "$OUT_DIR/timeline.txt"
cat "$OUT_DIR/timeline.txt" "$OUT_DIR/exit.txt" 2>/dev/null
