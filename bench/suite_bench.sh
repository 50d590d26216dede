#!/usr/bin/env bash
# `cuda-agent bench` over a suite with the synthesizer on the GPU machine, one device call at a
# time: the run store travels in .device/state/ so that a run cut at the call's limit resumes in
# the next call (unpack $OUT/state/store.sqlite.gz into .device/state/store.sqlite and carry
# .device again). Leaves three files in $OUT, as the device tool brings back eight at most (a call
# that leaves more may lose the store): the tables (bench.txt, with where the device's time went),
# the store gzipped (state/store.sqlite.gz: the whole suite's store is over 16 MiB, the most the
# tool brings back of a file, and a seventh of that gzipped) and extras.tgz (the progress lines,
# `report --json`, the HTML report, eval_steps.json, the GPU's name, every episode's log, the
# machine's memory and load every 5 s).
#   SUITE=builtin FILTER='level1/* level2/00?_*' JOBS=6 LIMIT=540 bash bench/suite_bench.sh
# (FILTER: globs separated by spaces, quoted so that the shell here leaves them alone; FRESH=1:
# eager and torch.compile timed in this run, beside its candidates, not taken from the store).
set -u
cd "$(dirname "$0")/.."
source bench/device_env.sh
out=${OUT:-bench/results}
state=.device/state
mkdir -p "$out/state" "$state"
store=$state/store.sqlite
# Run folders in the machine's tmpfs where it has room: an evaluation at full size writes 20-30
# GiB there and reads them back, 0.24 s a GiB in /dev/shm against 0.5-0.74 in the ext4 /tmp
# (bench/host_copies.py). TMPDIR set by the caller wins.
if [ -z "${TMPDIR:-}" ] && [ "$(df -BG --output=avail /dev/shm 2>/dev/null | tail -1 | tr -dc 0-9)" -ge 64 ] 2>/dev/null; then
  export TMPDIR=/dev/shm/cuda-agent-tmp
  mkdir -p "$TMPDIR"
fi
bin=${CUDA_AGENT_BIN:-build/cuda-agent}
extras=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$extras/gpu.txt" 2>&1
if [ -f "$store" ] && "$bin" --store "$store" report b1 > /dev/null 2>&1; then
  run=(--resume b1)
else
  run=(--suite "${SUITE:-builtin}" --device cuda --tune "${TUNE:-off}" ${FRESH:+--fresh-baselines})
  set -f  # the globs are the bench's to match, not the shell's
  for glob in ${FILTER:-}; do run+=(--filter "$glob"); done
  set +f
fi
# The machine every 5 s while the bench runs (free memory, page cache, dirty and in-writeback
# pages in GiB, load, GiB free in $TMPDIR): what an evaluation's host steps wait on.
(while sleep 5; do
  echo "$(date +%T) $(awk '/^(MemFree|Cached|Dirty|Writeback):/ {printf "%s %.1f ", $1, $2 / 1048576}' /proc/meminfo)load $(cut -d' ' -f1 /proc/loadavg) tmp_free $(df -BG --output=avail "${TMPDIR:-/tmp}" | tail -1)"
done) > "$extras/system.txt" &
sampler=$!
# SIGINT at the limit: the bench stops its episodes and keeps every result it has.
timeout -s INT -k 30 "${LIMIT:-540}" "$bin" --store "$store" bench "${run[@]}" --jobs "${JOBS:-6}" \
  --html "$extras/report.html" > "$out/bench.txt" 2> "$extras/progress.txt"
echo "bench: exit $?"
kill $sampler 2>/dev/null
"$bin" --store "$store" report b1 --json > "$extras/report.json"
"$bin" --store "$store" report b1 --html "$extras/report.html" >> "$out/bench.txt"
# Where the device's time went: the harness processes' steps over every evaluation of the run.
python3 bench/eval_steps.py "$store" --json "$extras/eval_steps.json" >> "$out/bench.txt"
gzip -c "$store" > "$out/state/store.sqlite.gz"
# Each episode's progress lines, for a task that took long or failed.
cp -r "${XDG_CACHE_HOME:-$HOME/.cache}/cuda-agent/bench" "$extras/episodes" 2>/dev/null
tar czf "$out/extras.tgz" -C "$extras" . 2>/dev/null
tail -5 "$extras/progress.txt"
cat "$out/bench.txt"
files=$(find "$out" -type f | wc -l)
if [ "$files" -gt 8 ]; then
  echo "suite_bench: $out holds $files files and the device tool brings back eight: the store" \
       "may be left behind" >&2
fi
