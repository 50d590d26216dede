#!/usr/bin/env bash
# One GPU call's worth of kernel work: times the synthesizer's kernels for the tasks in
# $KERNEL_TASKS ("all": the whole built-in suite) beside eager and torch.compile
# (synth_kernels.py, at most $KERNEL_S seconds; CONFIGS=1: every launch configuration; CONFIG_IDS:
# these ids set on every kernel besides, for a pipeline's kernels; PROFILE=1:
# the kernels each side runs, by torch.profiler; TF32=1: the candidate in TF32), runs each
# configuration of the kernels of the tasks in $SANITIZE_TASKS once under compute-sanitizer's
# $SANITIZE tool (memcheck by default; at most $SANITIZE_S seconds), then the tasks in
# $SUITE_TASKS through the evaluator (synth_suite.py, at most $SUITE_S seconds), leaving tables and
# JSON under $OUT.
#   KERNEL_TASKS="level1/011_sum_dim ..." SANITIZE_TASKS="..." SUITE_TASKS="..." \
#     bash bench/device_round.sh
# A cut-off kernel run resumes: unpack its synth-kernels-rows.tgz into bench/results/kernels and
# carry that folder into the next call.
set -u
cd "$(dirname "$0")/.."
source bench/device_env.sh
results=${OUT:-bench/results}
mkdir -p "$results"
work=$(mktemp -d)
if [ -n "${KERNEL_TASKS:-}" ]; then
  # Task rows kept in bench/results/kernels/synth-kernels-work (carried back in) are not redone.
  kernels=bench/results/kernels
  only=(--only $KERNEL_TASKS)
  [ "$KERNEL_TASKS" = all ] && only=()
  OUT=$kernels timeout "${KERNEL_S:-420}" python3 bench/synth_kernels.py --jobs "${JOBS:-8}" \
    --gpu-jobs "${GPU_JOBS:-3}" --reps "${REPS:-15}" ${CONFIGS:+--configs} ${CONFIG_IDS:+--config-ids $CONFIG_IDS} ${PROFILE:+--profile} \
    ${TF32:+--tf32} "${only[@]}" \
    > "$results/synth_kernels.txt" 2>&1
  echo "synth_kernels: exit $?"
  cp "$kernels/synth_kernels.json" "$results/" 2>/dev/null
  tar czf "$results/synth-kernels-rows.tgz" -C "$kernels" --exclude episodes synth-kernels-work
fi
if [ -n "${SANITIZE_TASKS:-}" ]; then
  OUT=$work timeout "${SANITIZE_S:-240}" python3 bench/synth_kernels.py --jobs "${JOBS:-15}" \
    --gpu-jobs "${GPU_JOBS:-3}" --sanitize "${SANITIZE:-memcheck}" --only $SANITIZE_TASKS \
    > "$results/sanitize_kernels.txt" 2>&1
  echo "sanitize: exit $?"
  cp "$work/sanitize_kernels.json" "$results/" 2>/dev/null
fi
if [ -n "${SUITE_TASKS:-}" ]; then
  OUT=$work timeout "${SUITE_S:-150}" python3 bench/synth_suite.py --device cuda \
    --tune "${TUNE:-off}" --only $SUITE_TASKS > "$results/synth_suite.txt" 2>&1
  echo "synth_suite: exit $?"
  cp "$work/synth_suite.json" "$results/" 2>/dev/null
  # each task's record, for a run cut short
  tar czf "$results/synth-suite-work.tgz" -C bench/results synth-suite-work-cuda-1-all 2>/dev/null
fi
tail -n 60 "$results"/synth_*.txt "$results"/sanitize_*.txt 2>/dev/null
