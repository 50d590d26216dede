#!/usr/bin/env bash
# Supervised warm-up before RL (docs/rl.md): episodes that earned reward 2 or more, the
# synthesizer's among them, as multi-turn chats with their tools.
#
#   build/cuda-agent bench --suite builtin --device cuda            # the synthesizer: run bN
#   build/cuda-agent export warmup bN --min-reward 2 --per-task 4 --out data/warmup.parquet
set -euo pipefail
MODEL=${MODEL:-Qwen/Qwen3-8B}

torchrun --standalone --nnodes=1 --nproc_per_node=8 -m verl.trainer.fsdp_sft_trainer \
  data.train_files=data/warmup.parquet \
  data.val_files=data/warmup.parquet \
  data.multiturn.enable=true \
  data.multiturn.messages_key=messages \
  data.multiturn.tools_key=tools \
  data.max_length=32768 \
  model.partial_pretrain="$MODEL" \
  trainer.total_epochs=2 \
  trainer.project_name=cuda-agent \
  trainer.experiment_name=sft-warmup \
  "$@"
