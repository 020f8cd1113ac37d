#!/usr/bin/env bash
# CI's wheel job: what a user installs is the wheel, not this checkout. Builds the wheel and the
# sdist (into dist/), checks the wheel holds every package and data file, installs it (not editable)
# into a fresh venv beside the pinned torch and Triton, and runs the installed command from a folder
# outside the checkout: --list, --check on a shipped session, --replay smoke-quick. Then checks the
# sdist carries what the tests need (tests/, the shipped folders, LICENSE, CHANGELOG.md).
#   PY=python3 PINS="torch==2.13.0 triton==3.7.1" bash .ci/wheel_check.sh   (make wheel-check sets both)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PY:-python3}
PINS=${PINS:?set PINS to the setup pair of the Makefile}
BUILD_PY=${BUILD_PY:-.venv/bin/python}
WORK=$(mktemp -d /tmp/wheel-check.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
quiet() { "$@" 2>&1 | { grep -v -e "is ignored: it is neither a file nor a directory" || true; }; }
export PYTHONWARNINGS=ignore PIP_DISABLE_PIP_VERSION_CHECK=1

echo "== build (wheel + sdist) =="
rm -rf dist build
"$BUILD_PY" -m build --version > /dev/null 2>&1 || quiet "$BUILD_PY" -m pip install -q 'build>=1'
quiet "$BUILD_PY" -m build -q --outdir dist . > "$WORK/build.log" || { cat "$WORK/build.log"; exit 1; }
WHEEL=$(ls dist/*.whl)
SDIST=$(ls dist/*.tar.gz)
ls -l dist

echo "== wheel contents =="
"$BUILD_PY" - "$WHEEL" "$SDIST" <<'EOF'
import sys, tarfile, tomllib, zipfile
from pathlib import Path

wheel, sdist = sys.argv[1], sys.argv[2]
names = set(zipfile.ZipFile(wheel).namelist())
cfg = tomllib.loads(Path("pyproject.toml").read_text())["tool"]["setuptools"]
dirs = cfg["package-dir"]
problems = []
for pkg in cfg["packages"]:
    inside = pkg.replace(".", "/") + "/__init__.py"
    if inside not in names:
        problems.append(f"package {pkg}: {inside} is missing")
# every data file the package-data globs name, from the source folders
for pkg, globs in cfg["package-data"].items():
    src = Path(dirs.get(pkg, pkg.replace(".", "/")))
    for g in globs:
        files = sorted(src.glob(g))
        if not files:
            problems.append(f"{pkg}: no {g} in {src}/ (the glob matches nothing)")
        for f in files:
            want = pkg.replace(".", "/") + "/" + f.name
            if want not in names:
                problems.append(f"{want} is missing")
# every module of the mapped folders and of workbench/
for pkg in cfg["packages"]:
    src = Path(dirs.get(pkg, pkg.replace(".", "/")))
    for f in src.glob("*.py"):
        want = pkg.replace(".", "/") + "/" + f.name
        if want not in names:
            problems.append(f"{want} is missing")
counts = {ext: sum(n.endswith(ext) for n in names) for ext in (".py", ".cu", ".cuh", ".yaml", ".tcss")}
print("wheel:", wheel, counts)
sd = tarfile.open(sdist).getnames()
top = sd[0].split("/")[0]
for need in ("tests/conftest.py", "tests/fixtures", "tests/__snapshots__", "kernels/gelu.cu", "screens/app.tcss",
             "sessions/smoke-quick.yaml", "examples/rmsnorm.yaml", "LICENSE", "CHANGELOG.md", "Makefile"):
    if not any(n == f"{top}/{need}" or n.startswith(f"{top}/{need}/") for n in sd):
        problems.append(f"sdist: {need} is missing")
print("sdist:", sdist, len(sd), "members")
for p in problems:
    print("FAIL", p)
sys.exit(1 if problems else 0)
EOF

echo "== fresh venv: $PINS, then the wheel (not editable) =="
"$PY" -m venv "$WORK/venv"
V="$WORK/venv/bin"
quiet "$V/python" -m pip install -q $PINS
quiet "$V/python" -m pip install -q "$ROOT/$WHEEL"
"$V/python" -m pip show kernel-workbench | sed -n '1,3p'

echo "== run from outside the checkout =="
mkdir -p "$WORK/elsewhere"
cd "$WORK/elsewhere"
"$V/python" - <<'EOF'
import workbench, workbench.kernels, workbench.screens, workbench.sessions
print("imported from", workbench.__file__)
assert "site-packages" in workbench.__file__, workbench.__file__
EOF
"$V/workbench" --version
"$V/workbench" --list
"$V/workbench" --check lecture06-gelu
# the replay goes through the default warm daemon, as a user's does; stop it after (CI leaves none)
trap '"$V/workbench" --daemon-stop > /dev/null 2>&1; rm -rf "$WORK"' EXIT
"$V/workbench" --replay smoke-quick -o smoke.json
"$V/python" -c "import json; d = json.load(open('smoke.json')); print('smoke-quick rows:', len(d['results']), 'provenance:', d['provenance']['workbench'])"
# the TUI twice on a pseudo-terminal: in its own process, then forked by the warm TUI process it left
mkdir -m 700 "$WORK/daemons"
WORKBENCH_DAEMON_DIR="$WORK/daemons" XDG_DATA_HOME="$WORK/data" "$V/python" "$ROOT/.ci/tui_warm_check.py"
WORKBENCH_DAEMON_DIR="$WORK/daemons" "$V/workbench" --daemon-stop
echo "wheel job: ok ($WHEEL, ${SECONDS}s)"
