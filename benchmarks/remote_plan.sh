#!/usr/bin/env bash
# Run a benchmark plan on a lent GPU machine from an archive of one commit, resuming from the
# results file the working tree carries, and leave the results and the judge's caches in $OUT.
#   bash benchmarks/remote_prepare.sh SHA           # on this machine, once per commit
#   bash benchmarks/remote_plan.sh SHA SECONDS [PLAN]   # on the lent machine (carry scratch, .deb)
# Optional carried inputs: .deb/*.deb (bubblewrap, unpacked under /opt/bw), scratch/whl/*.whl
# (packages the image lacks), scratch/carry/xdg.tar.gz (the baseline and tuning caches of an
# earlier call). Rows are keyed by the archive's source tree, so calls at one commit add up.
set -u
SHA=$1; SECS=$2; PLAN=$(realpath "${3:-benchmarks/plans/gpu.toml}")  # the bench runs from $F
. benchmarks/remote_setup.sh
[ -f "$PLAN" ] || { echo "remote_plan.sh: no plan $PLAN"; exit 2; }
if [ ! -d /opt/xdg/drtriton ] && [ -f scratch/carry/xdg.tar.gz ]; then
  mkdir -p /opt/xdg && tar -xzf scratch/carry/xdg.tar.gz -C /opt/xdg
fi
RES=$(python3 -c "import tomllib; print(tomllib.load(open('$PLAN', 'rb'))['results'])")
mkdir -p "$F/$(dirname "$RES")"
# a warm machine's results file may hold rows the carried one lacks: keep the longer
if [ -f "$ROOT/$RES" ] && [ "$(wc -l < "$ROOT/$RES")" -ge "$(cat "$F/$RES" 2>/dev/null | wc -l)" ]
then cp "$ROOT/$RES" "$F/$RES"; fi
echo "rows before: $(cat "$F/$RES" 2>/dev/null | wc -l)"
cd "$F"
keep() {  # what comes back even if the call is cut short (the kernel store is rebuilt there)
  cp "$RES" "$OUT/" 2>/dev/null
  (cd /opt/xdg && tar -czf "$OUT/xdg.tar.gz.part" drtriton/*.sqlite 2>/dev/null \
    && mv "$OUT/xdg.tar.gz.part" "$OUT/xdg.tar.gz")
}
( n=0; while sleep 30; do
    echo "$(date +%T) load $(cut -d' ' -f1 /proc/loadavg)" \
      "gpu $(nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader) rows $(wc -l < "$RES")"
    cp "$RES" "$OUT/" 2>/dev/null; n=$((n + 1)); [ $((n % 4)) -eq 0 ] && keep
  done ) > "$OUT/mon.log" 2>&1 &
MON=$!
timeout -s INT -k 60 "$SECS" python3 -m drtriton.cli bench --plan "$PLAN" > "$OUT/bench.log" 2>&1
echo "bench rc $?"
kill $MON; keep
tail -3 "$OUT/mon.log"; tail -25 "$OUT/bench.log"
