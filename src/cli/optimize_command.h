/// `cuda-agent optimize TASK`: one episode of the built-in synthesizer: capture the task's graph,
/// write kernels/ and model_new.py in a fresh workspace, and evaluate them with the evaluator
/// every policy goes through.
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
  std::unique_ptr<Args> args_;
};

}  // namespace cuda_agent
