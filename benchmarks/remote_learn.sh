#!/usr/bin/env bash
# Run the learning experiment (`drtriton learn`) on a lent GPU machine from an archive of one
# commit, resuming from the run directory an earlier call sent back; leave in $OUT the run
# directory and results (gzipped tar in parts of at most 15 MB, less the untrained model's
# weights, which its seed remakes), the judge's caches, and the logs.
#   bash benchmarks/remote_prepare.sh SHA PLAN                # on this machine, once per commit
#   bash benchmarks/remote_learn.sh SHA SECONDS [PLAN] [UNTIL]   # there (carry scratch, .deb)
# Carried inputs: those of remote_setup.sh, scratch/carry/run.tgz.part-* and
# scratch/carry/xdg.tar.gz (an earlier call's $OUT files).
set -u
SHA=$1; SECS=$2; PLAN=$(realpath "${3:-benchmarks/plans/learning.toml}"); UNTIL=${4:-}
. benchmarks/remote_setup.sh
[ -f "$PLAN" ] || { echo "remote_learn.sh: no plan $PLAN"; exit 2; }
field() { python3 -c "import tomllib; print(tomllib.load(open('$PLAN', 'rb'))['$1'])"; }
RUN=$(field out); RESULTS=$(field results)
if [ ! -d /opt/xdg/drtriton ] && [ -f scratch/carry/xdg.tar.gz ]; then
  tar -xzf scratch/carry/xdg.tar.gz -C /opt/xdg
fi
cd "$F"
if [ ! -d "$RUN" ] && ls "$ROOT"/scratch/carry/run.tgz.part-* >/dev/null 2>&1; then
  cat "$ROOT"/scratch/carry/run.tgz.part-* | tar -xzf -
fi
if [ -f "$RUN/untrained.done" ] && ! ls "$RUN"/untrained/*.safetensors >/dev/null 2>&1; then
  rm "$RUN/untrained.done"  # remade from the plan's seed and the run's tokenizer
fi
echo "stages done before: $(cd "$RUN" 2>/dev/null && ls *.done 2>/dev/null | tr '\n' ' ')"
( while sleep 30; do
    echo "$(date +%T) load $(cut -d' ' -f1 /proc/loadavg)" \
      "gpu $(nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader)" \
      "| $(tail -c 300 "$OUT/learn.log" | tr '\r\n' '  ' | tail -c 160)"
  done ) > "$OUT/mon.log" 2>&1 &
MON=$!
timeout -s INT -k 60 "$SECS" python3 -m drtriton.cli learn --plan "$PLAN" ${UNTIL:+--until "$UNTIL"} \
  > "$OUT/learn.log" 2>&1
echo "learn rc $?"
kill $MON
tar -czf - --exclude="$RUN/untrained/*.safetensors" --exclude="$RUN/*/trainer" "$RUN" \
  $( [ -d "$RESULTS" ] && echo "$RESULTS" ) | split -b 15m - "$OUT/run.tgz.part-"
(cd /opt/xdg && tar -czf "$OUT/xdg.tar.gz" drtriton/*.sqlite 2>/dev/null)
ls -la "$OUT"; echo "stages done: $(cd "$RUN" && ls *.done | tr '\n' ' ')"
cat "$RUN/stage_costs.json" 2>/dev/null; tail -5 "$OUT/mon.log"; tail -30 "$OUT/learn.log"
