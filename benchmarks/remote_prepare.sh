#!/usr/bin/env bash
# Make, on this machine, what the remote_*.sh scripts carry to a lent GPU machine (carry
# `scratch` and `.deb`): the archive of one commit, bubblewrap's packages, the wheels the GPU
# image lacks and, given a learning plan, its run directory made up to the CPU's part of `pairs`.
#   bash benchmarks/remote_prepare.sh [SHA] [LEARNING_PLAN]
# SHA defaults to HEAD. Idempotent: what is there already is kept (delete it to remake it).
set -euo pipefail
cd "$(dirname "$0")/.."
SHA=$(git rev-parse --short=7 "${1:-HEAD}"); PLAN=${2:-}
PY=${PY:-.venv/bin/python}
[ -x "$PY" ] || { echo "remote_prepare.sh: no $PY (run make venv first)"; exit 2; }
mkdir -p scratch/whl scratch/carry .deb
[ -f "scratch/head-$SHA.tar" ] || git archive "$SHA" -o "scratch/head-$SHA.tar"
ls .deb/bubblewrap_*.deb >/dev/null 2>&1 \
  || (cd .deb && apt-get download bubblewrap libcap2 >/dev/null 2>&1) \
  || { echo "remote_prepare.sh: apt-get download bubblewrap libcap2 failed"; exit 1; }
# TRL and datasets with what datasets needs beyond the image (Python 3.12), at this venv's versions
wheels=()
for name in trl datasets dill multiprocess xxhash fsspec; do
  wheels+=("$name==$("$PY" -c "import importlib.metadata as m; print(m.version('$name'))")")
done
ls scratch/whl/trl-*.whl >/dev/null 2>&1 || "$PY" -m pip download -q --no-deps \
  --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d scratch/whl "${wheels[@]}"
echo "archive scratch/head-$SHA.tar; $(ls .deb | wc -l) packages in .deb;" \
  "$(ls scratch/whl | wc -l) wheels in scratch/whl"
[ -n "$PLAN" ] || exit 0
RUN=$("$PY" -c "import tomllib; print(tomllib.load(open('$PLAN', 'rb'))['out'])")
"$PY" -m drtriton.cli learn --plan "$PLAN" --prepare-for cuda
rm -f scratch/carry/run.tgz.part-*
tar -czf - --exclude="$RUN/untrained/*.safetensors" "$RUN" | split -b 15m - scratch/carry/run.tgz.part-
echo "run directory $RUN in $(ls scratch/carry/run.tgz.part-* | wc -l) part(s) under scratch/carry"
