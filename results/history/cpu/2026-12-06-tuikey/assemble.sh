#!/bin/bash
# assemble.sh SRC_TREE DEST: a flat tree where workbench/{screens,kernels,sessions} are real folders
set -e
src=$1; dest=$2
rm -rf "$dest"; mkdir -p "$dest"
cp -r "$src/workbench" "$dest/workbench"
for d in screens kernels sessions; do rm -rf "$dest/workbench/$d"; cp -r "$src/$d" "$dest/workbench/$d"; done
cp -r "$src/benchmarks" "$dest/benchmarks"
find "$dest" -name __pycache__ -prune -exec rm -rf {} +
