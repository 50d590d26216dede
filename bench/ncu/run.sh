#!/usr/bin/env bash
# Nsight Compute over one call of the synthesizer's kernels and one of torch.compile's, per task:
# speed of light, memory workload, launch and occupancy; a report and a CSV per task under $OUT.
#   source bench/device_env.sh && OUT=/tmp/ncu bash bench/ncu/run.sh level2/016_... [more]
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-bench/results/ncu}
mkdir -p "$out"
bin=${CUDA_AGENT_BIN:-build/cuda-agent}
for id in "$@"; do
  name=${id//\//-}
  ws=$(mktemp -d)/ws
  "$bin" optimize "tasks/$id.py" --device cuda --stage compile --workspace "$ws" > /dev/null || {
    echo "$id: no candidate"; continue; }
  mkdir -p "$ws/build"
  nvcc -O3 -std=c++17 -arch=sm_90 -shared -Xcompiler -fPIC -lineinfo -o "$ws/build/libkernels.so" \
    "$ws"/kernels/*.cu || { echo "$id: nvcc failed"; continue; }
  ncu --profile-from-start off --cache-control all --clock-control none \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section LaunchStats \
    --section Occupancy --section WarpStateStats --section SchedulerStats -f -o "$out/$name" \
    python3 bench/ncu/profile_task.py "$ws/model.py" "$ws" "$ws/build/libkernels.so" \
    > "$out/$name.log" 2>&1 || { echo "$id: ncu failed"; tail -5 "$out/$name.log"; continue; }
  ncu -i "$out/$name.ncu-rep" --csv --page details > "$out/$name.csv"
  ncu -i "$out/$name.ncu-rep" --page details --print-units base 2>/dev/null |
    grep -E "^  [a-z_A-Z]|Duration|DRAM Throughput|Memory Throughput|L1/TEX Hit|L2 Hit|Achieved Occupancy|Registers Per|Block Size|Grid Size|Compute \(SM\) Th|Warp Cycles Per Issued|Issued Warp|Eligible Warps|No Eligible" |
    sed "s/^/$name /"
done
