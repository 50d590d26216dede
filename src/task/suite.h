/// A suite is a folder of task files: the built-in one under tasks/, or one that `tasks import`
/// wrote. Tasks sit in level folders (level1/, level2/, level3/, as in KernelBench) or, for a
/// suite without levels, directly in the folder; an optional suite.json names and describes it.
/// Uses: `tasks list` (suites, levels, counts), `tasks check DIR`, and every command that runs a
/// suite of tasks.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "util/status.h"

namespace cuda_agent {

struct SuiteTask {
  std::string id;     // "level1/001_relu", or "001_relu" in a suite without levels
  std::string level;  // "level1", or "" without levels
  std::filesystem::path path;
};

struct Suite {
  std::string name;  // suite.json's "name", else the folder's name
  std::string description;
  std::string source;  // where its tasks came from
  std::filesystem::path root;
  std::vector<SuiteTask> tasks;  // ordered by id
};

/// Reads the suite in dir: a missing folder, an unreadable or malformed suite.json, or a folder
/// with no task files is an error that says which. Python files whose name starts with "_" are
/// helpers, not tasks.
Status load_suite(const std::filesystem::path& dir, Suite* suite);

/// The suites directly inside root (each subfolder that load_suite accepts), by name.
std::vector<Suite> find_suites(const std::filesystem::path& root);

/// The built-in suite's folder: install_root()/tasks.
std::filesystem::path builtin_suite_dir();

/// Where `tasks import` writes suites unless told otherwise: <cache dir>/suites.
std::filesystem::path imported_suites_dir();

/// A suite by folder, or by name among the built-in and imported ones; NotFound lists the names.
Status find_suite(const std::string& which, Suite* suite);

/// The suite's tasks whose id matches one of patterns (shell patterns: *, ?, [...], where *
/// also crosses a '/'), in order; every task when there are none. InvalidArgument when patterns
/// match nothing.
Status select_tasks(const Suite& suite, const std::vector<std::string>& patterns,
                    std::vector<SuiteTask>* tasks);

}  // namespace cuda_agent
