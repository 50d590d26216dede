/// One agent episode from start to reward: lay out the workspace, run the loop over the model,
/// evaluate the workspace afresh, and file the trajectory in the run store.
///
/// Isolation: what the model's commands evaluate (utils/compile.py, verify.py, profile.py) goes
/// to an episode store and build cache of its own, outside the workspace; the run store, its
/// build cache, the harness and the workspace's infrastructure are read-only to those commands
/// where the kernel allows it. The final evaluation uses the run store's record of the workspace,
/// put back as it was laid out if anything changed it, so nothing the model did or said decides
/// its reward but the files it left.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include "agent/loop.h"
#include "eval/evaluator.h"
#include "llm/client.h"
#include "sandbox/process_runner.h"
#include "store/store.h"
#include "task/task.h"
#include "util/status.h"

namespace cuda_agent::agent {

struct EpisodeOptions {
  std::string policy = "llm";  // recorded in the trajectory: "llm" or "replay"
  AgentOptions agent;
  std::string endpoint;                // recorded in the trajectory
  std::filesystem::path workspace;     // a new folder
  std::filesystem::path private_dir;   // the episode's store, build cache and logs: a new folder
  std::filesystem::path template_dir;  // harness/workspace
  std::filesystem::path binary;        // the cuda-agent the workspace's utils/ call
  EvalOptions eval;                    // the final evaluation's (device, shrink, harness, ...)
};

struct EpisodeOutcome {
  Episode episode;
  bool evaluated = false;  // false: interrupted, or no verdict (the Status says why)
  EvalResult final;
  long long run_id = 0;
  nlohmann::json record;  // the trajectory as filed
};

/// The trajectory is filed whatever the ending, so nothing is lost to an interrupt (run_id is
/// set whenever the loop ran); a non-OK Status after the loop means the final evaluation reached
/// no verdict.
Status run_llm_episode(const Task& task, const EpisodeOptions& options, llm::LlmClient* client,
                       Store* store, ProcessRunner* runner,
                       std::function<void(const std::string&)> progress, EpisodeOutcome* outcome);

/// The first user message: the task, the device, and model.py's text.
std::string task_message(const Task& task, const std::string& device, int shrink,
                         const std::string& precision = "fp32");

}  // namespace cuda_agent::agent
