#!/usr/bin/env bash
# One GPU call's worth of kernel work: times the synthesizer's kernels for the tasks in
# $KERNEL_TASKS beside eager and torch.compile (synth_kernels.py, at most $KERNEL_S seconds;
# CONFIGS=1: every launch configuration), then runs the tasks in $SUITE_TASKS through the
# evaluator (synth_suite.py, at most $SUITE_S seconds), leaving tables and JSON under $OUT.
#   KERNEL_TASKS="level1/011_sum_dim ..." SUITE_TASKS="..." bash bench/device_round.sh
set -u
cd "$(dirname "$0")/.."
source bench/device_env.sh
results=${OUT:-bench/results}
mkdir -p "$results"
work=$(mktemp -d)
if [ -n "${KERNEL_TASKS:-}" ]; then
  OUT=$work timeout "${KERNEL_S:-420}" python3 bench/synth_kernels.py --jobs "${JOBS:-15}" \
    --reps "${REPS:-15}" ${CONFIGS:+--configs} --only $KERNEL_TASKS > "$results/synth_kernels.txt" 2>&1
  echo "synth_kernels: exit $?"
  cp "$work/synth_kernels.json" "$results/" 2>/dev/null
fi
if [ -n "${SUITE_TASKS:-}" ]; then
  OUT=$work timeout "${SUITE_S:-150}" python3 bench/synth_suite.py --device cuda \
    --tune "${TUNE:-off}" --only $SUITE_TASKS > "$results/synth_suite.txt" 2>&1
  echo "synth_suite: exit $?"
  cp "$work/synth_suite.json" "$results/" 2>/dev/null
  # each task's record, for a run cut short
  tar czf "$results/synth-suite-work.tgz" -C bench/results synth-suite-work-cuda-1-all 2>/dev/null
fi
tail -n 60 "$results"/synth_*.txt
