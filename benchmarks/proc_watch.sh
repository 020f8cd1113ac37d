#!/usr/bin/env bash
# Snapshot the Python processes of a GPU call every INTERVAL_S seconds, into FILE, until killed
# (benchmarks/run_on_gpu.sh starts it in the background). Each snapshot: the process tree with
# state and wait channel, the kernel stack of any process in uninterruptible sleep (D) or asleep
# in the same wait channel for 3 snapshots, load_inline lock files under the cache, and the last
# lines of each worker log. What a hung row looks like from outside, when its own stack dump
# cannot come back (a process in D state takes no signal).
# Usage: bash benchmarks/proc_watch.sh FILE [INTERVAL_S]
set -u
FILE=$1
INTERVAL=${2:-10}
declare -A seen
while true; do
  {
    echo "=== $(date +%T)"
    ps -eo pid,ppid,stat,etimes,pcpu,rss,wchan:28,args --forest | grep -E 'python|nvcc|ninja|cicc|ptxas|c\+\+|g\+\+' \
      | grep -v -E 'grep|proc_watch' | cut -c1-220
    for pid in $(pgrep -f python); do
      st=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || continue
      wc=$(cat "/proc/$pid/wchan" 2>/dev/null)
      key="$pid:$wc"
      seen[$key]=$(( ${seen[$key]:-0} + 1 ))
      if [ "$st" = D ] || [ "${seen[$key]}" = 3 ]; then
        echo "--- pid $pid state $st wchan $wc (x${seen[$key]}): kernel stack"
        cat "/proc/$pid/stack" 2>/dev/null | head -20
        for t in /proc/"$pid"/task/*; do
          ts=$(awk '{print $3}' "$t/stat" 2>/dev/null)
          [ "$ts" = D ] && echo "  task ${t##*/} D $(cat "$t/wchan" 2>/dev/null)"
        done
      fi
    done
    find "${XDG_CACHE_HOME:-$HOME/.cache}" /tmp -maxdepth 6 -name lock -newermt '-1 hour' 2>/dev/null \
      | while read -r f; do echo "lock: $f ($(( $(date +%s) - $(stat -c %Y "$f") )) s old)"; done
    for f in /tmp/workbench-worker-*.log; do
      [ -s "$f" ] && { echo "--- $f"; tail -n 3 "$f" | cut -c1-200; }
    done
  } >> "$FILE" 2>&1
  sleep "$INTERVAL"
done
