/// What trainers read, made from the run store's trajectories: rollouts of a group run with their
/// rewards, advantages and returns; warm-up data by rejection sampling; and the prompts of a
/// suite. Every record is one JSON object; write_records puts them in JSON Lines, or in Parquet
/// through harness/rl_parquet.py.
///
/// Chats are in the Chat Completions wire format the episode used: "messages" (system, user,
/// assistant with "tool_calls" whose "arguments" is JSON text, tool with "tool_call_id") and
/// "tools" (the function specs the model was offered), which is what verl's multi-turn SFT
/// dataset (messages_key, tools_key) and OpenRLHF's (--input_key messages --apply_chat_template)
/// hand to a tokenizer's chat template.
///
///   rollout  {"schema": "cuda-agent.rollout/1", "task", "sample", "group_size", "run",
///             "policy", "model", "outcome", "recipe", "reward", "estimator", "advantage",
///             "gamma", "returns": [one per assistant turn], "speedup_vs_eager",
///             "speedup_vs_compile", "messages", "tools"}
///   warm-up  {"schema": "cuda-agent.sft/1", "task", "run", "policy", "recipe", "reward",
///             "messages", "tools"}
///   prompt   {"data_source": "cuda-agent", "prompt": [system, user], "ability": "cuda-kernels",
///             "reward_model": {"style": "rule", "ground_truth": task id}, "extra_info": {"task",
///             "device", "shrink", "index"}}: a row of verl's RL dataset, scored through
///             harness/rl_reward.py
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "report/metrics.h"
#include "store/store.h"
#include "util/status.h"

namespace cuda_agent::rl {

/// The recipe's reward for a trajectory's final evaluation (eval/reward.h); empty when the
/// episode reached no verdict (interrupted, or the evaluator could not judge it).
std::optional<double> trajectory_reward(const nlohmann::json& trajectory,
                                        const std::string& recipe);

/// The chat of a trajectory for a trainer: {"messages", "tools"}, the tools being the specs of
/// those the episode offered.
nlohmann::json trajectory_chat(const nlohmann::json& trajectory);

struct RolloutOptions {
  std::string recipe = "discrete";
  std::string estimator = "grpo";  // rl/advantage.h
  double gamma = 0.99;
};

/// An episode left out of an export, and why.
struct Dropped {
  std::string key;  // "level1/001_relu#2", or a run "r12"
  std::string why;
};

/// One rollout record per episode of a group run's results, in task and sample order, with the
/// advantage of its reward within its task's group. An episode with no trajectory or no verdict
/// is left out (its group is scored without it) and named in dropped.
Status build_rollouts(Store* store, const std::vector<report::TaskResult>& results,
                      const RolloutOptions& options, std::vector<nlohmann::json>* records,
                      std::vector<Dropped>* dropped);

/// A few lines on rollouts: episodes and groups, the mean reward, the groups whose episodes all
/// scored alike (they carry no GRPO signal), and each episode left out.
std::string format_rollout_summary(const std::vector<nlohmann::json>& records,
                                   const std::vector<Dropped>& dropped,
                                   const RolloutOptions& options);

struct WarmupOptions {
  std::string recipe = "discrete";
  double min_reward = 2;  // keep an episode whose reward is at least this
  int per_task = 4;       // at most this many episodes a task, the best first
};

struct WarmupCounts {
  int considered = 0, no_verdict = 0, below = 0, duplicates = 0, over_cap = 0, kept = 0;
};

/// Rejection sampling for supervised warm-up: of trajectories (any policy's, the synthesizer's
/// among them), those whose reward reaches min_reward, one of each set whose task and assistant
/// turns are the same, at most per_task a task (highest reward first, then the earliest run).
/// Records come out by task, then reward.
std::vector<nlohmann::json> select_warmup(const std::vector<nlohmann::json>& trajectories,
                                          const WarmupOptions& options, WarmupCounts* counts);

/// A verl RL dataset row for a task: the first two messages an episode of it starts with.
nlohmann::json prompt_record(const std::string& task_id, const std::string& system,
                             const std::string& user, const std::string& device, int shrink,
                             int index);

/// Writes records to path: JSON Lines, or Parquet when path ends in .parquet (python runs
/// parquet_script, which needs pyarrow). Written whole or not at all.
Status write_records(const std::vector<nlohmann::json>& records, const std::filesystem::path& path,
                     const std::string& python, const std::filesystem::path& parquet_script);

}  // namespace cuda_agent::rl
