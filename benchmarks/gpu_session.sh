#!/usr/bin/env bash
# One call on a lent GPU machine (2 x H200): run a phase of the GPU checks and benchmarks and pack
# every result into $OUT/results.tgz (the device returns few files). Run from the repo root:
#   bash benchmarks/gpu_session.sh judge   # judge suite + timing check (GPU 0) | RL smoke + judge throughput (GPU 1)
#   bash benchmarks/gpu_session.sh bench   # judge subset (ONLY=...) then strict (GPU 0) | hybrid (GPU 1)
#   bash benchmarks/gpu_session.sh final   # judge check + throughput (GPU 0) | strict compiler benchmark (GPU 1)
#   bash benchmarks/gpu_session.sh compiler # compiler benchmark L2/1/5: strict, then hybrid (both GPUs)
#   bash benchmarks/gpu_session.sh strict    # strict compiler benchmark on one GPU (LEVELS, NUM)
#   bash benchmarks/gpu_session.sh strict_rl # strict compiler benchmark (GPU 0) | RL steps, 7B costs (GPU 1)
#   bash benchmarks/gpu_session.sh train     # RL steps, judge on both GPUs; then 7B-shape step costs
#   bash benchmarks/gpu_session.sh search_train # search L5/L20 (GPU 0) | RL steps + 7B step costs (GPU 1)
#   bash benchmarks/gpu_session.sh profile # compiler diagnostics (GPU 0) | judge throughput (GPU 1)
#   bash benchmarks/gpu_session.sh hybrid  # compiler benchmark, hybrid mode
#   bash benchmarks/gpu_session.sh search_ac # search L5 first program (GPU 0) | all-correct A/B, search second (GPU 1)
#   bash benchmarks/gpu_session.sh finish    # strict then hybrid benchmark (GPU 0) | all-correct A/B, search L5 (GPU 1)
#   bash benchmarks/gpu_session.sh l20     # level-20 filters over the held-out pool, sample, compiler benchmark
#   bash benchmarks/gpu_session.sh l20_search # L20 compiler rows resumed, then L5 search (GPU 0) | L20 search (GPU 1)
#   bash benchmarks/gpu_session.sh search_hybrid # fragment search, hybrid judge: L5 (GPU 0) | L20 (GPU 1)
#   bash benchmarks/gpu_session.sh search  # fragment search (with its whole-program contestant), L5/L20
#   bash benchmarks/gpu_session.sh search_strict # strict search L5 (GPU 0) | hybrid L20 search resumed, then strict L20 (GPU 1)
#   bash benchmarks/gpu_session.sh search_recompute # L20 lines 1, 4, 6 searched again after max_window_recompute: hybrid (GPU 0) | strict (GPU 1)
#   bash benchmarks/gpu_session.sh compiler_recompute # those L20 programs' compiler rows again: strict (GPU 0) | hybrid, then pytest -m gpu (GPU 1)
#   bash benchmarks/gpu_session.sh profile_slow # per-kernel times, strict: level-20 sample (GPU 0) | level 5 (GPU 1)
#   bash benchmarks/gpu_session.sh compiler_matmul # strict L20 rows whose matmuls changed (folded batch, narrow tiles): line 3 (GPU 0) | lines 2, 5 (GPU 1)
#   bash benchmarks/gpu_session.sh compiler_pool # the sampled programs whose pools changed (reachable window offsets): strict (GPU 0) | hybrid (GPU 1)
#   bash benchmarks/gpu_session.sh compiler_layout # the sampled programs whose reductions/scans now tile along the innermost dim longer than 1: strict (GPU 0) | hybrid (GPU 1)
#   bash benchmarks/gpu_session.sh compiler_scatter # strict transposed convolutions as one GEMM over the input: strict rows (GPU 0) | L2-972 hybrid, per-kernel profile (GPU 1)
#   bash benchmarks/gpu_session.sh compiler_fill # one GPU: the transposed convolutions' per-column fill and one-row product: strict rows, L2-972 hybrid, per-kernel times
#   bash benchmarks/gpu_session.sh compiler_loads # one GPU: convolution loads by tile index, whole-output fills: strict rows, L1-53 and L2-972 hybrid, L5-1 per-kernel times
#   bash benchmarks/gpu_session.sh search_refresh_l5 # one GPU: strict level-5 searches of the programs changed since they were searched
#   bash benchmarks/gpu_session.sh outer_search # one GPU: L5-1 (narrow transposed convolution as outer products), then search_refresh_l5
#   bash benchmarks/gpu_session.sh search_refresh_l20 # one GPU: strict level-20 searches again, most-changed programs first (resumes)
#   bash benchmarks/gpu_session.sh search_strict_split # strict L5 search resumed, then strict L20 lines 2, 4 (GPU 0) | lines 1, 3, 5, 6 (GPU 1)
# Needs: torch, triton, transformers (there), OR-Tools wheels in .whl/ (carried) for the synthesis
# filters that the benchmark re-runs on the GPU. Pass DRTRITON_COMMIT=<your HEAD's short hash>
# literally in the command: the device's copy of .git can be stale, and rows are stamped with it
# (every row also carries source_sha, a digest of the source that actually ran). TIMEOUT_S sets the
# judge's limit per child run (default 150 s).
set -u
phase=${1:?phase: judge | bench | search}
budget=${BUDGET_S:-520}
res=/tmp/drtriton-results
rm -rf "$res" && mkdir -p "$res"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:src
else
  export PYTHONPATH=src
fi
export PYTHONUNBUFFERED=1
[ -n "${DRTRITON_COMMIT:-}" ] || echo "warning: DRTRITON_COMMIT not set; rows get the (possibly stale) git HEAD"
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,memory.used --format=csv > "$res/gpu_$phase.txt" 2>&1
df -h /dev/shm /tmp >> "$res/gpu_$phase.txt" 2>&1
bench() {  # bench NAME ARGS...: drtriton bench on the held-out sample; resumes from
  # benchmarks/results/gpu/NAME.json.rows.jsonl when an earlier call left rows there
  bench_file benchmarks/programs/synthetic_gpu_heldout.jsonl "$@"
}
bench_file() {  # bench_file PROGRAMS NAME ARGS...
  local programs=$1 name=$2; shift 2
  mkdir -p benchmarks/results/gpu
  timeout "$budget" python3 -m drtriton.cli bench --programs "$programs" \
    --device cuda --out "benchmarks/results/gpu/$name.json" "$@" > "$res/$name.log" 2>&1
  cp benchmarks/results/gpu/"$name".* "$res"/
}
search_sample() {  # search_sample LEVEL MODE NAME [L20_PROGRAMS]: fragment search of the level-5 or
  # level-20 sample (L20_PROGRAMS: a part of the level-20 sample, to share it between the GPUs)
  local level=$1 mode=$2 name=$3 l20=${4:-benchmarks/programs/synthetic_gpu_heldout_l20.jsonl}
  if [ "$level" = 20 ]; then
    bench_file "$l20" "$name" --levels 20 --num 8 --mode "$mode" \
      --search --max-fragment-ops "${MAX_OPS_L20:-7}" --search-wall-s "${SEARCH_S_L20:-200}" --timeout-s "${TIMEOUT_S:-150}"
  else
    bench "$name" --levels 5 --num 8 --mode "$mode" --search \
      --max-fragment-ops "${MAX_OPS:-3}" --search-wall-s "${SEARCH_S:-150}" --timeout-s "${TIMEOUT_S:-150}"
  fi
}
rejudge() {  # rejudge NAME STRICT_RESERVE_S HYBRID_RESERVE_S "STRICT..." "HYBRID..." "PROFILED...":
  # one GPU judges the programs STRICT in strict mode (rows compiler_NAME_strict, leaving
  # STRICT_RESERVE_S of the budget), then HYBRID in hybrid mode (compiler_NAME_hybrid, leaving
  # HYBRID_RESERVE_S), then times PROFILED kernel by kernel (strict) in what is left (profile_NAME)
  local name=$1 strict_reserve=$2 hybrid_reserve=$3 total=$budget start=$SECONDS all=1,2,5,20
  pick "$res/$name.jsonl" $4
  pick "$res/${name}_h.jsonl" $5
  pick "$res/${name}_p.jsonl" $6
  budget=$((total - strict_reserve)) bench_file "$res/$name.jsonl" "compiler_${name}_strict" --levels $all \
    --num 8 --mode strict --timeout-s "${TIMEOUT_S:-150}"
  budget=$((total - (SECONDS - start) - hybrid_reserve)) bench_file "$res/${name}_h.jsonl" "compiler_${name}_hybrid" \
    --levels $all --num 8 --mode hybrid --timeout-s "${TIMEOUT_S:-150}"
  local left=$((total - (SECONDS - start)))
  [ "$left" -gt 40 ] && timeout "$left" python3 benchmarks/gpu_profile.py --mode strict \
    --programs "$res/${name}_p.jsonl" --levels $all --budget-s $((left - 15)) \
    --out "$res/profile_$name" > "$res/profile_$name.log" 2>&1
}
refresh_l5_search() {  # the strict level-5 searches whose programs' translations changed after
  # they ran (L5-1, 2, 3, 6, 7), again; the verdict cache starts from search_strict_l5's
  pick "$res/refresh_l5.jsonl" L5-7 L5-1 L5-6 L5-3 L5-2
  local g=benchmarks/results/gpu
  python3 benchmarks/merge_caches.py $g/search_refresh_strict_l5.json.search.sqlite $g/search_strict_l5.json.search.sqlite
  bench_file "$res/refresh_l5.jsonl" search_refresh_strict_l5 --levels 5 --num 8 --mode strict --search \
    --max-fragment-ops "${MAX_OPS:-3}" --search-wall-s "${SEARCH_S:-150}" --timeout-s "${TIMEOUT_S:-150}"
}
pick() {  # pick OUT NAME...: the sampled programs named L<level>-<index> (levels 1, 2, 5 sample
  # first, then the level-20 sample), in the order named, as a programs file
  python3 - "$@" <<'PY'
import json, sys
rows = {}
for f in ("benchmarks/programs/synthetic_gpu_heldout.jsonl", "benchmarks/programs/synthetic_gpu_heldout_l20.jsonl"):
    for line in open(f):
        r = json.loads(line)
        rows.setdefault(f"L{r['level']}-{r['index']}", line)
open(sys.argv[1], "w").writelines(rows[n] for n in sys.argv[2:])
PY
}
preflight() {  # a few judge cases on GPU 0 (~30 s): a broken judge must not spend the call
  CUDA_VISIBLE_DEVICES=0 timeout 120 python3 benchmarks/gpu_judge_check.py --out "$res/preflight" \
      --skip-timing --only legit_add_relu,patch_input_rng,mutate_inputs > "$res/preflight.log" 2>&1
  python3 -c "import json,sys; s=json.load(open('$res/preflight/summary.json'))['suite']; sys.exit(s['as_expected'] != s['cases'])"
}
if [ "${PREFLIGHT:-1}" = 1 ] && [ "$phase" != judge ] && ! preflight; then
  echo "preflight failed: the judge does not pass its own cases on this GPU; phase $phase skipped"
  phase=none
fi
case $phase in
  none) ;;
  judge)
    (CUDA_VISIBLE_DEVICES=0 timeout "$budget" python3 benchmarks/gpu_judge_check.py --out "$res/judge" > "$res/judge.log" 2>&1) &
    (CUDA_VISIBLE_DEVICES=1 timeout 330 python3 benchmarks/gpu_rl_smoke.py --programs benchmarks/programs/rl_smoke_gpu.jsonl \
        --out "$res/rl" --budget-s 240 > "$res/rl.log" 2>&1
     CUDA_VISIBLE_DEVICES=1 timeout 150 python3 benchmarks/bench_judge.py --device cuda --n 6 --workers 1 \
        --out "$res/judge_throughput" > "$res/judge_throughput.log" 2>&1) &
    wait ;;
  compiler)  # the compiler benchmark, LEVELS (default 2,1,5) in order: strict on both GPUs (one
    # problem per GPU at a time); then hybrid, which reuses the strict verdicts of programs whose
    # kernels are the same in both modes and judges the rest
    budget=$((${BUDGET_S:-520} - ${HYBRID_S:-120})) bench strict --levels "${LEVELS:-2,1,5}" --num "${NUM:-8}" \
        --mode strict --timeout-s "${TIMEOUT_S:-150}"
    budget=${HYBRID_S:-120} bench hybrid --levels "${LEVELS:-2,1,5}" --num "${NUM:-8}" --mode hybrid \
        --timeout-s "${TIMEOUT_S:-150}" --reuse-rows benchmarks/results/gpu/strict.json.rows.jsonl ;;
  strict)  # one GPU: the strict compiler benchmark, resuming (LEVELS, NUM)
    bench strict --levels "${LEVELS:-1,2,5}" --num "${NUM:-4}" --mode strict --timeout-s 100 ;;
  strict_rl)  # GPU 0: the strict compiler benchmark (resumes, LEVELS); GPU 1: a few RL steps, then
    # the per-step costs of a 7B-shaped model
    (CUDA_VISIBLE_DEVICES=0 bench strict --levels "${LEVELS:-2,1,5}" --num "${NUM:-8}" --mode strict --timeout-s "${TIMEOUT_S:-150}") &
    (CUDA_VISIBLE_DEVICES=1 timeout $((budget - 160)) python3 benchmarks/gpu_rl_smoke.py \
        --programs benchmarks/programs/rl_smoke_gpu.jsonl --out "$res/rl" --steps "${STEPS:-8}" \
        --budget-s $((budget - 210)) > "$res/rl.log" 2>&1
     CUDA_VISIBLE_DEVICES=1 timeout 150 python3 benchmarks/gpu_7b_cost.py --out "$res/cost7b" > "$res/cost7b.log" 2>&1) &
    wait ;;
  train)  # RL steps with the policy on GPU 0 and a judge sandbox on every GPU; then the per-step
    # costs of a 7B-shaped model on GPU 0
    timeout $((budget - 140)) python3 benchmarks/gpu_rl_smoke.py --programs benchmarks/programs/rl_smoke_gpu.jsonl \
        --out "$res/rl" --steps "${STEPS:-8}" --judge-workers 0 --budget-s $((budget - 190)) > "$res/rl.log" 2>&1
    CUDA_VISIBLE_DEVICES=0 timeout 130 python3 benchmarks/gpu_7b_cost.py --out "$res/cost7b" > "$res/cost7b.log" 2>&1 ;;
  search_train)  # GPU 0: fragment search on L5 and L20 (first program each); GPU 1: RL steps,
    # then the per-step costs of a 7B-shaped model
    (CUDA_VISIBLE_DEVICES=0 bench search_a --levels 5,20 --num 1 --mode strict --search \
        --max-fragment-ops "${MAX_OPS:-3}" --search-wall-s "${SEARCH_S:-150}" --timeout-s "${TIMEOUT_S:-150}") &
    (CUDA_VISIBLE_DEVICES=1 timeout $((budget - 140)) python3 benchmarks/gpu_rl_smoke.py \
        --programs benchmarks/programs/rl_smoke_gpu.jsonl --out "$res/rl" --steps "${STEPS:-8}" \
        --budget-s $((budget - 190)) > "$res/rl.log" 2>&1
     CUDA_VISIBLE_DEVICES=1 timeout 130 python3 benchmarks/gpu_7b_cost.py --out "$res/cost7b" > "$res/cost7b.log" 2>&1) &
    wait ;;
  search_ac)  # GPU 0: fragment search on the first program of LEVELS (default 5); GPU 1: the
    # --all-correct A/B, then the search on the second program
    python3 benchmarks/second_programs.py benchmarks/programs/synthetic_gpu_heldout.jsonl /tmp/second.jsonl
    (CUDA_VISIBLE_DEVICES=0 bench search_a --levels "${LEVELS:-5}" --num 1 --mode strict --search \
        --max-fragment-ops "${MAX_OPS:-3}" --search-wall-s "${SEARCH_S:-300}" --timeout-s "${TIMEOUT_S:-150}") &
    (CUDA_VISIBLE_DEVICES=1 timeout 200 python3 benchmarks/gpu_all_correct.py \
        --programs benchmarks/programs/rl_smoke_gpu.jsonl --out "$res/all_correct" > "$res/all_correct.log" 2>&1
     CUDA_VISIBLE_DEVICES=1 budget=$((budget - 200)) bench_file /tmp/second.jsonl search_b --levels "${LEVELS:-5}" \
        --num 1 --mode strict --search --max-fragment-ops "${MAX_OPS:-3}" --search-wall-s "${SEARCH_S:-300}" \
        --timeout-s "${TIMEOUT_S:-150}") &
    wait ;;
  finish)  # GPU 0: the strict compiler benchmark (resumes; LEVELS default 5,2), then hybrid with
    # reuse; GPU 1: the --all-correct A/B, then the fragment search on the first level-5 program
    (export CUDA_VISIBLE_DEVICES=0
     budget=$((budget - ${HYBRID_S:-100})) bench strict --levels "${LEVELS:-5,2}" --num 8 --mode strict --timeout-s "${TIMEOUT_S:-150}"
     budget=${HYBRID_S:-100} bench hybrid --levels "${LEVELS:-5,2}" --num 8 --mode hybrid --timeout-s "${TIMEOUT_S:-150}" \
        --reuse-rows benchmarks/results/gpu/strict.json.rows.jsonl) &
    (export CUDA_VISIBLE_DEVICES=1
     timeout 170 python3 benchmarks/gpu_all_correct.py --programs benchmarks/programs/rl_smoke_gpu.jsonl \
        --out "$res/all_correct" > "$res/all_correct.log" 2>&1
     budget=$((budget - 175)) bench search_a --levels 5 --num 1 --mode strict --search \
        --max-fragment-ops "${MAX_OPS:-3}" --search-wall-s "${SEARCH_S:-170}" --timeout-s "${TIMEOUT_S:-150}") &
    wait ;;
  bench)  # GPU 0: the judge's failing cases with full reasons, then strict; GPU 1: hybrid
    (CUDA_VISIBLE_DEVICES=0 timeout 120 python3 benchmarks/gpu_judge_check.py --out "$res/judge_only" --skip-timing \
        --only "${ONLY:-}" > "$res/judge_only.log" 2>&1
     CUDA_VISIBLE_DEVICES=0 bench strict --levels 1,2,5 --num "${NUM:-5}" --mode strict) &
    (CUDA_VISIBLE_DEVICES=1 bench hybrid --levels 1,2,5 --num "${NUM:-5}" --mode hybrid) &
    wait ;;
  final)  # GPU 0: the whole judge check, then judge throughput; GPU 1: strict compiler benchmark
    (CUDA_VISIBLE_DEVICES=0 timeout 400 python3 benchmarks/gpu_judge_check.py --out "$res/judge" > "$res/judge.log" 2>&1
     CUDA_VISIBLE_DEVICES=0 timeout 150 python3 benchmarks/bench_judge.py --device cuda --n 6 --workers 1 \
        --out "$res/judge_throughput" > "$res/judge_throughput.log" 2>&1) &
    (CUDA_VISIBLE_DEVICES=1 bench strict --levels 1,2,5 --num "${NUM:-5}" --mode strict) &
    wait ;;
  profile)  # GPU 0: compiler diagnostics (per-kernel times); GPU 1: judge throughput on CUDA
    (CUDA_VISIBLE_DEVICES=0 timeout "$budget" python3 benchmarks/gpu_profile.py \
        --programs benchmarks/programs/synthetic_gpu_heldout.jsonl --levels "${LEVELS:-1,2,5}" \
        --budget-s $((budget - 60)) --out "$res/profile" > "$res/profile.log" 2>&1) &
    (CUDA_VISIBLE_DEVICES=1 timeout 300 python3 benchmarks/bench_judge.py --device cuda --n 4 --workers 2 \
        --repeats 2 --no-compile-baseline --out "$res/throughput_nocompile" > "$res/throughput_nocompile.log" 2>&1
     CUDA_VISIBLE_DEVICES=1 timeout 200 python3 benchmarks/bench_judge.py --device cuda --n 2 --workers 1 \
        --repeats 1 --out "$res/throughput_compile" > "$res/throughput_compile.log" 2>&1) &
    wait ;;
  l20)  # level 20: the synthesis filters over the held-out pool on both GPUs (FILTER_S; a run
    # resumes from the logs), the sample (the first NUM valid programs in index order), then the
    # compiler benchmark on it: strict on both GPUs, then hybrid reusing identical kernels' verdicts
    pool=benchmarks/programs/synthetic_gpu_heldout_l20_pool.jsonl
    sample=benchmarks/programs/synthetic_gpu_heldout_l20.jsonl
    logs="benchmarks/results/gpu/l20_filter_0.jsonl benchmarks/results/gpu/l20_filter_1.jsonl"
    for g in 0 1; do
      (CUDA_VISIBLE_DEVICES=$g timeout "${FILTER_S:-240}" python3 benchmarks/gpu_filter.py check \
          --programs $pool --log benchmarks/results/gpu/l20_filter_$g.jsonl --shard $g/2 > "$res/filter_$g.log" 2>&1) &
    done
    wait
    cp benchmarks/results/gpu/l20_filter_*.jsonl "$res"/
    python3 benchmarks/gpu_filter.py keep --programs $pool --logs $logs --keep "${NUM:-8}" --out $sample > "$res/keep.log" 2>&1
    cp $sample "$res"/
    budget=$((budget - ${FILTER_S:-240} - ${HYBRID_S:-120})) bench_file $sample strict_l20 --levels 20 \
        --num "${NUM:-8}" --mode strict --timeout-s "${TIMEOUT_S:-150}"
    budget=${HYBRID_S:-120} bench_file $sample hybrid_l20 --levels 20 --num "${NUM:-8}" --mode hybrid \
        --timeout-s "${TIMEOUT_S:-150}" --reuse-rows benchmarks/results/gpu/strict_l20.json.rows.jsonl ;;
  search_hybrid)  # fragment search, hybrid judge (the compiler's strict and hybrid candidates for
    # the whole program and for every fragment): GPU 0 the level-5 sample, GPU 1 the level-20
    # sample; a call cut short resumes from the rows and the verdict cache (OUT.search.sqlite)
    (CUDA_VISIBLE_DEVICES=0 search_sample 5 hybrid search_l5) &
    (CUDA_VISIBLE_DEVICES=1 search_sample 20 hybrid search_l20) &
    wait ;;
  l20_search)  # GPU 0: the level-20 compiler benchmark resumed (strict STRICT_S, then hybrid
    # HYBRID_S), then the hybrid fragment search on the level-5 sample; GPU 1: the hybrid fragment
    # search on the level-20 sample (both resume from their rows and verdict caches)
    sample=benchmarks/programs/synthetic_gpu_heldout_l20.jsonl
    (export CUDA_VISIBLE_DEVICES=0
     budget=${STRICT_S:-90} bench_file $sample strict_l20 --levels 20 --num 8 --mode strict --timeout-s "${TIMEOUT_S:-150}"
     budget=${HYBRID_S:-200} bench_file $sample hybrid_l20 --levels 20 --num 8 --mode hybrid \
        --timeout-s "${TIMEOUT_S:-150}" --reuse-rows benchmarks/results/gpu/strict_l20.json.rows.jsonl
     budget=$((budget - ${STRICT_S:-90} - ${HYBRID_S:-200})) search_sample 5 hybrid search_l5) &
    (CUDA_VISIBLE_DEVICES=1 search_sample 20 hybrid search_l20) &
    wait ;;
  search_strict)  # fragment search under the strict judge (the compiler's strict candidate only):
    # GPU 0 the level-5 sample; GPU 1 first the hybrid level-20 search resumed (HYBRID_S), then
    # the strict level-20 search; rows and verdict caches resume across calls
    (CUDA_VISIBLE_DEVICES=0 search_sample 5 strict search_strict_l5) &
    (export CUDA_VISIBLE_DEVICES=1
     budget=${HYBRID_S:-300} search_sample 20 hybrid search_l20
     budget=$((budget - ${HYBRID_S:-300})) search_sample 20 strict search_strict_l20) &
    wait ;;
  search_strict_split)  # the strict level-20 search shared by both GPUs: lines 1, 3, 5 of the sample
    # (search_strict_l20), then line 6 (search_strict_l20c) on GPU 1; lines 2, 4 (search_strict_l20b)
    # on GPU 0 after it finishes the strict level-5 search (at most L5_S, default 300 s); rows and
    # verdict caches resume across calls
    sample=benchmarks/programs/synthetic_gpu_heldout_l20.jsonl
    sed -n '1p;3p;5p' $sample > "$res/l20_odd.jsonl"
    sed -n '2p;4p' $sample > "$res/l20_even.jsonl"
    sed -n '6p' $sample > "$res/l20_last.jsonl"
    (export CUDA_VISIBLE_DEVICES=0; start=$SECONDS
     budget=${L5_S:-300} search_sample 5 strict search_strict_l5
     budget=$((budget - (SECONDS - start))) search_sample 20 strict search_strict_l20b "$res/l20_even.jsonl") &
    (export CUDA_VISIBLE_DEVICES=1; start=$SECONDS
     search_sample 20 strict search_strict_l20 "$res/l20_odd.jsonl"
     budget=$((budget - (SECONDS - start))) search_sample 20 strict search_strict_l20c "$res/l20_last.jsonl") &
    wait ;;
  search_recompute)  # the level-20 programs whose translation changed with max_window_recompute
    # (sample lines 1, 4, 6), searched again: hybrid on GPU 0, strict on GPU 1. The verdict caches
    # start from the earlier searches' caches, so unchanged candidates are not judged again.
    sample=benchmarks/programs/synthetic_gpu_heldout_l20.jsonl
    sed -n '1p;4p;6p' $sample > "$res/l20_changed.jsonl"
    g=benchmarks/results/gpu
    python3 benchmarks/merge_caches.py $g/search_rc_l20.json.search.sqlite $g/search_l20.json.search.sqlite
    python3 benchmarks/merge_caches.py $g/search_rc_strict_l20.json.search.sqlite \
        $g/search_strict_l20.json.search.sqlite $g/search_strict_l20b.json.search.sqlite $g/search_strict_l20c.json.search.sqlite
    (CUDA_VISIBLE_DEVICES=0 search_sample 20 hybrid search_rc_l20 "$res/l20_changed.jsonl") &
    (CUDA_VISIBLE_DEVICES=1 search_sample 20 strict search_rc_strict_l20 "$res/l20_changed.jsonl") &
    wait ;;
  compiler_recompute)  # the compiler benchmark of those programs (sample lines 1, 4, 6) again:
    # strict on GPU 0; hybrid, then the GPU test tier (pytest wheels in .whl/pytest/) on GPU 1
    sample=benchmarks/programs/synthetic_gpu_heldout_l20.jsonl
    sed -n '1p;4p;6p' $sample > "$res/l20_changed.jsonl"
    (export CUDA_VISIBLE_DEVICES=0
     bench_file "$res/l20_changed.jsonl" compiler_rc_strict_l20 --levels 20 --num 8 --mode strict --timeout-s "${TIMEOUT_S:-150}") &
    (export CUDA_VISIBLE_DEVICES=1; start=$SECONDS
     bench_file "$res/l20_changed.jsonl" compiler_rc_hybrid_l20 --levels 20 --num 8 --mode hybrid --timeout-s "${TIMEOUT_S:-150}"
     python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/pytest/*.whl
     timeout $((budget - (SECONDS - start))) python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu.py \
         > "$res/pytest_gpu.log" 2>&1) &
    wait ;;
  profile_slow)  # where the strict translations of the level-20 sample (GPU 0) and of the level-5
    # sample (GPU 1) spend their time, kernel by kernel: a diagnostic, not a verdict
    (CUDA_VISIBLE_DEVICES=0 timeout "$budget" python3 benchmarks/gpu_profile.py --mode strict \
        --programs benchmarks/programs/synthetic_gpu_heldout_l20.jsonl --levels 20 \
        --budget-s $((budget - 90)) --out "$res/profile_l20" > "$res/profile_l20.log" 2>&1) &
    (CUDA_VISIBLE_DEVICES=1 timeout "$budget" python3 benchmarks/gpu_profile.py --mode strict \
        --programs benchmarks/programs/synthetic_gpu_heldout.jsonl --levels 5 \
        --budget-s $((budget - 90)) --out "$res/profile_l5" > "$res/profile_l5.log" 2>&1) &
    wait ;;
  compiler_matmul)  # the strict level-20 programs whose matmul kernels changed (one W for every
    # batch folded into rows; narrow tiles under 8 columns), judged again
    sample=benchmarks/programs/synthetic_gpu_heldout_l20.jsonl
    sed -n '3p' $sample > "$res/l20_mm_a.jsonl"
    sed -n '2p;5p' $sample > "$res/l20_mm_b.jsonl"
    (CUDA_VISIBLE_DEVICES=0 bench_file "$res/l20_mm_a.jsonl" compiler_mm_strict_l20a --levels 20 --num 8 \
        --mode strict --timeout-s "${TIMEOUT_S:-150}") &
    (CUDA_VISIBLE_DEVICES=1 bench_file "$res/l20_mm_b.jsonl" compiler_mm_strict_l20b --levels 20 --num 8 \
        --mode strict --timeout-s "${TIMEOUT_S:-150}") &
    wait ;;
  compiler_pool)  # the programs of the compiler samples whose pooling kernels changed (window
    # offsets that can never reach the input are not looped over), judged again in both modes:
    # first L5-6, L20-37, L20-0 (part a), then L2-3342, L20-27, L20-26 (part b)
    pick "$res/pool_a.jsonl" L5-6 L20-37 L20-0
    pick "$res/pool_b.jsonl" L2-3342 L20-27 L20-26
    for g in 0 1; do
      mode=$([ $g = 0 ] && echo strict || echo hybrid)
      (export CUDA_VISIBLE_DEVICES=$g; start=$SECONDS
       bench_file "$res/pool_a.jsonl" compiler_pool_${mode}_a --levels 5,20 --num 8 --mode $mode --timeout-s "${TIMEOUT_S:-150}"
       budget=$((budget - (SECONDS - start)))  # timeout 0 would mean no limit at all
       [ "$budget" -gt 30 ] && bench_file "$res/pool_b.jsonl" compiler_pool_${mode}_b --levels 2,20 --num 8 \
           --mode $mode --timeout-s "${TIMEOUT_S:-150}") &
    done
    wait ;;
  compiler_layout)  # the programs of the compiler samples whose reductions or scans changed layout
    # (tiles along the innermost dim longer than 1), judged again in both modes, the cheap ones first
    pick "$res/layout.jsonl" L20-0 L5-3 L5-7 L20-22 L20-27 L20-37 L20-26
    (CUDA_VISIBLE_DEVICES=0 bench_file "$res/layout.jsonl" compiler_layout_strict --levels 20,5 --num 8 --mode strict --timeout-s "${TIMEOUT_S:-150}") &
    (CUDA_VISIBLE_DEVICES=1 bench_file "$res/layout.jsonl" compiler_layout_hybrid --levels 20,5 --num 8 --mode hybrid --timeout-s "${TIMEOUT_S:-150}") &
    wait ;;
  compiler_scatter)  # the programs whose strict transposed convolutions became one GEMM over the
    # input (taps never meet), judged again: strict (GPU 0) | L2-972 hybrid (its hybrid translation
    # has the same convolution kernel), then per-kernel times of the strict ones (GPU 1)
    pick "$res/scatter.jsonl" L5-7 L5-1 L2-972 L5-2 L20-26
    pick "$res/scatter_h.jsonl" L2-972
    (CUDA_VISIBLE_DEVICES=0 bench_file "$res/scatter.jsonl" compiler_scatter_strict --levels 2,5,20 --num 8 \
        --mode strict --timeout-s "${TIMEOUT_S:-150}") &
    (export CUDA_VISIBLE_DEVICES=1; start=$SECONDS
     bench_file "$res/scatter_h.jsonl" compiler_scatter_hybrid --levels 2 --num 8 --mode hybrid \
         --timeout-s "${TIMEOUT_S:-150}"
     budget=$((budget - (SECONDS - start)))
     [ "$budget" -gt 60 ] && timeout "$budget" python3 benchmarks/gpu_profile.py --mode strict \
         --programs "$res/scatter.jsonl" --levels 2,5,20 --budget-s $((budget - 30)) \
         --out "$res/profile_scatter" > "$res/profile_scatter.log" 2>&1) &
    wait ;;
  compiler_fill)  # one GPU: the programs whose transposed-convolution fill (tested per column) or
    # one-row product (a matrix-vector form) changed, judged again: strict, L2-972 hybrid, then
    # per-kernel times of L5-7 and L5-1 (strict)
    rejudge fill 150 80 "L5-7 L5-1 L2-972 L5-2 L20-26" "L2-972" "L5-7 L5-1" ;;
  compiler_loads)  # one GPU: the programs whose convolution loads now read a delinearized tile
    # index (no where(): coalesced, vectorisable) or whose fill writes every output, judged again:
    # strict, then hybrid L1-53 and L2-972, then per-kernel times of L5-1 (strict)
    rejudge loads 130 40 "L5-1 L5-7 L2-972 L5-2 L1-53 L2-3342 L20-27 L20-22" "L1-53 L2-972" "L5-1" ;;
  search_refresh_l20)  # one GPU: the strict level-20 searches, again, the programs whose whole
    # translation changed most since they ran first; the verdict cache starts from the earlier ones
    pick "$res/refresh_l20.jsonl" L20-25 L20-0 L20-37 L20-22 L20-26 L20-27
    g=benchmarks/results/gpu
    python3 benchmarks/merge_caches.py $g/search_refresh_strict_l20.json.search.sqlite $g/search_rc_strict_l20.json.search.sqlite \
        $g/search_strict_l20.json.search.sqlite $g/search_strict_l20b.json.search.sqlite $g/search_strict_l20c.json.search.sqlite
    search_sample 20 strict search_refresh_strict_l20 "$res/refresh_l20.jsonl" ;;
  outer_search)  # one GPU: L5-1, whose narrow transposed convolution is now one outer product per
    # input channel, judged again (at most 100 s); then refresh_l5_search in the time left
    pick "$res/outer.jsonl" L5-1
    total=$budget; start=$SECONDS
    budget=100 bench_file "$res/outer.jsonl" compiler_outer_strict --levels 5 --num 8 --mode strict \
        --timeout-s "${TIMEOUT_S:-150}"
    budget=$((total - (SECONDS - start))) refresh_l5_search ;;
  hybrid)
    bench hybrid --levels 1,2,5,20 --mode hybrid ;;
  search)  # fragment search on levels 5 and 20, strict; each row also holds the whole-program
    # candidate's verdict from the same run. GPU 0 takes the first program of each level, GPU 1
    # the second (a programs file without the first ones).
    python3 benchmarks/second_programs.py benchmarks/programs/synthetic_gpu_heldout.jsonl /tmp/second.jsonl
    (CUDA_VISIBLE_DEVICES=0 bench search_a --levels 5,20 --num 1 --mode strict --search \
        --max-fragment-ops "${MAX_OPS:-3}" --search-wall-s "${SEARCH_S:-150}" --timeout-s "${TIMEOUT_S:-150}") &
    (CUDA_VISIBLE_DEVICES=1 bench_file /tmp/second.jsonl search_b --levels 5,20 --num 1 --mode strict --search \
        --max-fragment-ops "${MAX_OPS:-3}" --search-wall-s "${SEARCH_S:-150}" --timeout-s "${TIMEOUT_S:-150}") &
    wait ;;
  *) echo "unknown phase $phase"; exit 2 ;;
esac
find "$res" -type f -size +2M -delete  # checkpoints and other bulk: the device returns 16 MiB at most
tar czf "$OUT/results.tgz" -C "$res" .
for f in "$res"/*.log; do echo "== $f"; tail -n 25 "$f"; done
