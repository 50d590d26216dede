/// `cuda-agent tasks ...`: list suites, check tasks against the dataset filters, synthesize new
/// tasks and import datasets. Registers its subcommands on the app and runs the one chosen.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

namespace cuda_agent {

class TasksCommand {
 public:
  /// default_device: what --device is when not given.
  TasksCommand(CLI::App* app, const std::string& default_device);
  ~TasksCommand();
  bool chosen() const;
  int run();

 private:
  int run_graph();

  struct Args;
  std::unique_ptr<Args> args_;
};

}  // namespace cuda_agent
