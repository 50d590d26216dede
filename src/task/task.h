/// A task is a PyTorch module to make faster, in KernelBench's format: one Python file with a
/// top-level `class Model(nn.Module)`, `get_inputs()` and `get_init_inputs()`. The task module
/// loads and validates such files; it never runs them (the harness does, in a sandbox).
#pragma once

#include <filesystem>
#include <string>

#include "util/status.h"

namespace cuda_agent {

struct Task {
  std::filesystem::path path;  // absolute
  std::string id;              // the file's stem, e.g. "19_ReLU"
  std::string source;          // the file's text
  std::string sha256;          // of source: the task's identity in caches and the run store
};

/// Reads and statically checks a task file. A missing file, or a file without one of the three
/// required top-level definitions, is an InvalidArgument naming the file and what is missing.
Status load_task(const std::filesystem::path& path, Task* task);

/// The same check on text already in memory (path is used only in messages).
Status check_task_source(const std::string& source, const std::string& path);

}  // namespace cuda_agent
