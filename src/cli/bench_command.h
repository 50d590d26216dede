/// `cuda-agent bench`: every task of a suite through a policy, resumable, with the paper's
/// figures at the end; `cuda-agent report RUN [--html FILE]`: a run's tables, and a report with
/// plots; `cuda-agent compare RUN_A RUN_B`: two runs task by task and in aggregate.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

namespace cuda_agent {

class BenchCommands {
 public:
  BenchCommands(CLI::App* app, const std::string& default_device);
  ~BenchCommands();
  bool chosen() const;
  /// store_path: the run store (empty: the default one).
  int run(const std::string& store_path);

 private:
  struct Args;
  int bench(const std::string& store_path);
  int report(const std::string& store_path);
  int compare(const std::string& store_path);
  std::unique_ptr<Args> args_;
};

}  // namespace cuda_agent
