#!/usr/bin/env bash
# GRPO on cuda-agent's tasks with verl, scored by `cuda-agent serve` (docs/rl.md).
#
# Evaluation node (GPUs verl does not use), once:
#   build/cuda-agent serve --host 0.0.0.0 --device cuda --gpus 0,1,2,3,4,5,6,7 --jobs 2 --queue 512
# Training node: the prompts, then this script.
#   build/cuda-agent export prompts --suite builtin --device cuda --out data/prompts.parquet
set -euo pipefail
CUDA_AGENT=${CUDA_AGENT:-$(cd "$(dirname "$0")/../.." && pwd)}
MODEL=${MODEL:-Qwen/Qwen3-8B}
export CUDA_AGENT_SERVICE=${CUDA_AGENT_SERVICE:-http://eval0:8321}

python3 -m verl.trainer.main_ppo \
  algorithm.adv_estimator=grpo \
  data.train_files=data/prompts.parquet \
  data.val_files=data/prompts.parquet \
  data.prompt_key=prompt \
  data.train_batch_size=32 \
  data.max_prompt_length=8192 \
  data.max_response_length=16384 \
  actor_rollout_ref.model.path="$MODEL" \
  actor_rollout_ref.actor.optim.lr=1e-6 \
  actor_rollout_ref.actor.ppo_mini_batch_size=16 \
  actor_rollout_ref.actor.use_kl_loss=True \
  actor_rollout_ref.rollout.name=vllm \
  actor_rollout_ref.rollout.n=8 \
  reward_model.reward_manager=batch \
  custom_reward_function.path="$CUDA_AGENT/harness/rl_reward.py" \
  custom_reward_function.name=compute_score_batch \
  trainer.n_gpus_per_node=8 \
  trainer.nnodes=1 \
  trainer.total_epochs=10 \
  trainer.project_name=cuda-agent \
  trainer.experiment_name=grpo-builtin \
  "$@"
