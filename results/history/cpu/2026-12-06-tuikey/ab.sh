#!/bin/bash
# ab.sh TAG PAIRS: key_latency_cpu and tui_tmux_latency, main then new, PAIRS times; lines to /tmp/tk/ab-TAG.jsonl
tag=$1; pairs=${2:-3}
py=/work/wt/tuikey/.venv/bin/python
out=/tmp/tk/ab-$tag.jsonl
for i in $(seq 1 $pairs); do
  for v in main new; do
    cd /tmp/tk/$v
    r=$($py benchmarks/key_latency_cpu.py /tmp/tk/kl-$tag-$v-$i 2>/dev/null | tail -1)
    echo "{\"pair\": $i, \"v\": \"$v\", \"bench\": \"keycpu\", \"r\": $r}" >> $out
    r=$($py benchmarks/tui_tmux_latency.py --python $py --runs 5 2>/dev/null | tail -1)
    echo "{\"pair\": $i, \"v\": \"$v\", \"bench\": \"tmux\", \"r\": $r}" >> $out
  done
done
echo done >> $out
