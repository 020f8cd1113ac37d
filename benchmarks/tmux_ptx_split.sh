#!/usr/bin/env bash
# Usage: bash benchmarks/tmux_ptx_split.sh OUT_DIR WIDTH HEIGHT (after make setup; user folders under /tmp/tcap)
# tmux tries of the PTX split view on this CPU (AOT PTX; Triton interpreted for the run)
set -u
OUTD=$1; W=$2; H=$3
export XDG_CACHE_HOME=/tmp/tcap/cache XDG_DATA_HOME=/tmp/tcap/data-$W XDG_CONFIG_HOME=/tmp/tcap/config
S=cap$W
ROOT=$(cd "$(dirname "$0")/.." && pwd)
tmux kill-session -t $S 2>/dev/null
tmux new-session -d -s $S -x $W -y $H "cd $ROOT && .venv/bin/workbench lecture06-softmax-1000 --device cpu"
cap() { sleep "$2"; tmux capture-pane -p -t $S > "$OUTD/$1.txt"; }
cap 01-open 12
tmux send-keys -t $S r; cap 02-running 5
for i in $(seq 1 40); do sleep 5; tmux capture-pane -p -t $S | grep -q "ready\|done\|finished" && break; done
cap 02b-run-done 1
tmux send-keys -t $S 3; cap 02-ptx-pane 6
tmux send-keys -t $S v; cap 03-split 5
tmux send-keys -t $S n; cap 04-next-counted-line 2
tmux send-keys -t $S n; cap 05-next-again 2
tmux send-keys -t $S s; cap 06-stage-ttir 4
tmux send-keys -t $S s s s; cap 07-stage-sass 4
tmux send-keys -t $S q; sleep 1; tmux send-keys -t $S y; sleep 2
tmux kill-session -t $S 2>/dev/null
