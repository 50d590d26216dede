/// `cuda-agent bench`: every task of a suite through a policy, resumable, with the paper's
/// figures at the end; `cuda-agent rollout`: the same with a group of episodes per task, written
/// out with their rewards, advantages and returns for an RL trainer; `cuda-agent report RUN [--html
/// FILE]`: a run's tables, and a report with plots; `cuda-agent compare RUN_A RUN_B`: two runs task
/// by task and in aggregate.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "bench/bench.h"
#include "store/store.h"
#include "util/status.h"

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
  /// Runs (or resumes) the episodes that command's options ask for, to the end; an error naming
  /// the run to resume, when interrupted.
  Status run_episodes(CLI::App* command, Store* store, bench::BenchSettings* settings,
                      bench::BenchSummary* summary);
  int bench(const std::string& store_path);
  int rollout(const std::string& store_path);
  int report(const std::string& store_path);
  int compare(const std::string& store_path);
  std::unique_ptr<Args> args_;
};

}  // namespace cuda_agent
