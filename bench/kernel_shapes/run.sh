#!/usr/bin/env bash
# Builds shapes.cu with the generated kernels of level1/001_relu and level1/011_sum_dim (from
# this checkout's cuda-agent, at their launch configurations) and prints its table.
#   source bench/device_env.sh && bash bench/kernel_shapes/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
bin=${CUDA_AGENT_BIN:-build/cuda-agent}
"$bin" optimize tasks/level1/001_relu.py --device cuda --stage compile --workspace "$work/relu" > /dev/null
"$bin" optimize tasks/level1/011_sum_dim.py --device cuda --stage compile --workspace "$work/sum" > /dev/null
nvcc -O3 -std=c++17 -arch=sm_90 -w -o "$work/shapes" bench/kernel_shapes/shapes.cu \
  "$work/relu/kernels/fused_elementwise.cu" "$work/sum/kernels/fused_rows.cu"
"$work/shapes"
# torch's relu (eager and torch.compile) on the same shape, timed the same way, for the ratio.
python3 - <<'PY'
import torch
x = torch.randn(16384, 32768, device="cuda")
flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
def median_ms(fn):
    for _ in range(3):
        fn()
    times = []
    for i in range(21):
        flush.fill_(i)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[10]
compiled = torch.compile(torch.relu)
print(f"torch.relu fp32: {median_ms(lambda: torch.relu(x)):.3f} ms")
print(f"torch.compile relu fp32: {median_ms(lambda: compiled(x)):.3f} ms")
PY
