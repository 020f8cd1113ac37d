#!/usr/bin/env bash
# #39 with the warm TUI process: the table's figures (tmux first frame warm / own process / first start,
# pane keys through the relay and in process, warm daemon, cold start)
set -u
export PYTHONUNBUFFERED=1
nvidia-smi -L
mkdir -p /tmp/ev
bash benchmarks/run_on_gpu.sh "tuitmux:200" "daemon_default:170" "coldstart:110:--quick" > /tmp/ev/stages.txt 2>&1
grep -v "timeline\|milestone\|^row \|^build \|^nvcc \|^plan\|^gelu \|^softmax \|^zygote\|^pool\|^worker" /tmp/ev/summary.txt | cut -c1-260
cp /tmp/ev/tuitmux/tuitmux/tui_tmux_latency.json $OUT/ 2>/dev/null
tar czf $OUT/evidence.tgz -C /tmp ev
