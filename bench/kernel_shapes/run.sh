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
