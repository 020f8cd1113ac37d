#!/bin/bash
cd /work/main
restore() { for f in app.py app.tcss chart_plot.py charts.py fitting.py; do cp /tmp/kl/new/$f screens/$f; done; }
trap restore EXIT
for i in 1 2 3; do
  for v in old new; do
    for f in app.py app.tcss chart_plot.py charts.py fitting.py; do cp /tmp/kl/$v/$f screens/$f; done
    rm -rf /tmp/kl/f
    r=$(timeout 300 .venv/bin/python /tmp/kl/kl2.py 2>&1 | tail -1)
    echo "$i $v $r"
  done
done
