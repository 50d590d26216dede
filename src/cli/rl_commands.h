/// `cuda-agent export KIND`: data for trainers from the run store (rollouts of a group run,
/// warm-up data by rejection sampling, a suite's prompts for verl); `cuda-agent serve`: the
/// evaluation service an RL trainer calls (rl/service.h).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

namespace cuda_agent {

class RlCommands {
 public:
  RlCommands(CLI::App* app, const std::string& default_device);
  ~RlCommands();
  bool chosen() const;
  /// store_path: the run store (empty: the default one).
  int run(const std::string& store_path);

 private:
  struct Args;
  int export_data(const std::string& store_path);
  int serve(const std::string& store_path);
  std::unique_ptr<Args> args_;
};

}  // namespace cuda_agent
