/// `cuda-agent optimize TASK`: one episode of a policy in a fresh workspace, judged by the
/// evaluator every policy goes through. --policy synth (the default): the built-in synthesizer
/// captures the task's graph and writes kernels/ and model_new.py. --policy llm: a model behind
/// an OpenAI-compatible endpoint works in the workspace through the agent's tools; its
/// trajectory is filed in the run store. --policy replay: a filed episode's replies again,
/// through the same loop and tools.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

namespace cuda_agent {

class OptimizeCommand {
 public:
  OptimizeCommand(CLI::App* app, const std::string& default_device);
  ~OptimizeCommand();
  bool chosen() const;
  /// store_path: the run store (empty: the default one).
  int run(const std::string& store_path);

 private:
  struct Args;
  int run_agent(const std::string& store_path);  // --policy llm or replay
  std::unique_ptr<Args> args_;
};

}  // namespace cuda_agent
