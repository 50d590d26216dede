#include "task/task.h"

#include <regex>
#include <vector>

#include "util/files.h"
#include "util/hash.h"

namespace cuda_agent {

Status check_task_source(const std::string& source, const std::string& path) {
  struct Required {
    const char* what;
    std::regex pattern;
  };
  // Top-level definitions start in column 0; the multiline flag makes ^ match after newlines.
  static const std::vector<Required> kRequired = {
      {"class Model", std::regex(R"(^class\s+Model\s*[(:])", std::regex::multiline)},
      {"def get_inputs()", std::regex(R"(^def\s+get_inputs\s*\()", std::regex::multiline)},
      {"def get_init_inputs()",
       std::regex(R"(^def\s+get_init_inputs\s*\()", std::regex::multiline)},
  };
  std::vector<std::string> missing;
  for (const auto& required : kRequired) {
    if (!std::regex_search(source, required.pattern)) missing.push_back(required.what);
  }
  if (missing.empty()) return Status::OK();
  std::string list;
  for (std::size_t i = 0; i < missing.size(); ++i) {
    if (i > 0) list += i + 1 == missing.size() ? " and " : ", ";
    list += missing[i];
  }
  return Status::InvalidArgument(
      path + " is not a task file: it has no top-level " + list +
      " (a task defines class Model(nn.Module), get_inputs() and get_init_inputs())");
}

Status load_task(const std::filesystem::path& path, Task* task) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return Status::InvalidArgument("task file " + path.string() + " does not exist");
  }
  std::string source;
  Status s = read_file(path, &source);
  if (!s.ok()) return s;
  s = check_task_source(source, path.string());
  if (!s.ok()) return s;
  task->path = std::filesystem::absolute(path).lexically_normal();
  task->id = path.stem().string();
  task->source = std::move(source);
  task->sha256 = sha256_hex(task->source);
  return Status::OK();
}

}  // namespace cuda_agent
