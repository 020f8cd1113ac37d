#!/usr/bin/env bash
# #39 at a1b76de: the table's figures (tmux first frame and pane keys, warm daemon, cold start)
set -u
export PYTHONUNBUFFERED=1
nvidia-smi -L
mkdir -p /tmp/ev
bash benchmarks/run_on_gpu.sh "tuitmux:110" "daemon_default:170" "coldstart:110:--quick" > /tmp/ev/stages.txt 2>&1
grep -v "timeline\|milestone\|^row \|^build \|^nvcc \|^plan\|^gelu \|^softmax \|^zygote\|^pool\|^worker" /tmp/ev/summary.txt | cut -c1-200
tar czf $OUT/evidence.tgz -C /tmp ev
