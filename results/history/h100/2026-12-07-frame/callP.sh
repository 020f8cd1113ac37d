#!/usr/bin/env bash
# #39 pane keys at HEAD (MemoStylesheet, PaneBox BLANK, LaidOutCompositor): A/B against 30e64c2 screens/ in turns
set -u
export PYTHONUNBUFFERED=1
nvidia-smi -L
mkdir -p /tmp/ev
bash benchmarks/run_on_gpu.sh "tuitmux:110" > /tmp/ev/stages.txt 2>&1
export PYTHONPATH=/tmp/site
python3 -m compileall -q .gpu/base_screens > /dev/null  # as the checkout's own folders are (tui_tmux_latency writes their bytecode)
OLD="'$PWD/benchmarks/launch_screens.py' '$PWD/.gpu/base_screens'"
for turn in new1 old1 new2 old2; do
  case $turn in
    old*) timeout 100 python3 benchmarks/tui_tmux_latency.py --runs 3 --presses 12 --session default --entry "$OLD" --out /tmp/ev/ab-$turn > /tmp/ev/ab-$turn.txt 2>&1 ;;
    new*) timeout 100 python3 benchmarks/tui_tmux_latency.py --runs 3 --presses 12 --session default --out /tmp/ev/ab-$turn > /tmp/ev/ab-$turn.txt 2>&1 ;;
  esac
  echo "$turn rc=$? $(tail -1 /tmp/ev/ab-$turn.txt | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print({k: d.get(k) for k in ("first_frame_median_s","key_median_ms","key_max_ms","key_ms","run_still_streaming")})' 2>&1 | tail -1)"
  tar czf $OUT/evidence.tgz -C /tmp ev
done
bash benchmarks/run_on_gpu.sh "daemon_default:170" "coldstart:110:--quick" > /tmp/ev/stages2.txt 2>&1
grep -v "timeline\|milestone\|^row \|^build \|^nvcc \|^plan\|^gelu \|^softmax " /tmp/ev/summary.txt | cut -c1-220
tar czf $OUT/evidence.tgz -C /tmp ev
