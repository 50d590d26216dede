/// `cuda-agent tasks check`: runs harness/task_check.py over a suite's tasks, a few processes at
/// once, and judges each task by the filters (filters.h) and by its similarity to a reference
/// set (similarity.h). Measurements are kept in a work folder as they arrive, keyed by the
/// task's text, the settings and the checker's own code, so an interrupted check resumes where it
/// stopped and a repeated one costs nothing. A task that crashes its process or hangs past the
/// per-task limit is dropped for it, and the process is restarted on the tasks after it.
#pragma once

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sandbox/process_runner.h"
#include "task/filters.h"
#include "task/suite.h"
#include "util/status.h"

namespace cuda_agent {

struct SuiteCheckOptions {
  std::string device = "cpu";
  int shrink = 1;  // each SCALABLE_SIZES constant divided by this
  int jobs = 1;    // checking processes at once; on cuda, their timed work takes turns
  double task_timeout_s = 600;
  double timing_budget_s = 1.0;
  FilterPolicy policy;
  std::vector<std::filesystem::path> reference_dirs;  // suites whose near-copies are dropped
  double max_similarity = 0.9;
  std::filesystem::path work_dir;  // measurements (resumable); created if missing
  std::string python = "python3";
  std::filesystem::path harness_dir;
  /// Called once per task as its verdict is known (from several threads, one at a time).
  std::function<void(const struct TaskVerdict&, int done, int total)> on_verdict;
};

struct TaskVerdict {
  SuiteTask task;
  bool kept = false;
  std::vector<DropReason> reasons;
  nlohmann::json measurement;  // task_check.py's record, without the graph
  std::string similar_to;      // the closest reference task, when there is one
  double similarity = 0;
};

struct SuiteCheckReport {
  std::string suite;
  std::string device;
  std::string device_name;
  int shrink = 1;
  FilterPolicy policy;
  std::vector<TaskVerdict> verdicts;  // in the suite's order

  int kept() const;
  nlohmann::json to_json() const;
};

Status check_suite(const Suite& suite, const SuiteCheckOptions& options, ProcessRunner* runner,
                   SuiteCheckReport* report);

}  // namespace cuda_agent
