#include "task/suite.h"

#include <fnmatch.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <regex>

#include "util/files.h"
#include "util/paths.h"

namespace fs = std::filesystem;

namespace cuda_agent {
namespace {

bool is_task_file(const fs::directory_entry& entry) {
  const fs::path& p = entry.path();
  return entry.is_regular_file() && p.extension() == ".py" && !p.filename().string().empty() &&
         p.filename().string()[0] != '_';
}

void add_tasks(const fs::path& dir, const std::string& level, std::vector<SuiteTask>* tasks) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!is_task_file(entry)) continue;
    std::string stem = entry.path().stem().string();
    tasks->push_back({level.empty() ? stem : level + "/" + stem, level, entry.path()});
  }
}

Status read_manifest(const fs::path& file, Suite* suite) {
  std::string text;
  Status s = read_file(file, &text);
  if (!s.ok()) return s;
  nlohmann::json manifest = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!manifest.is_object()) {
    return Status::InvalidArgument(file.string() + " is not a JSON object");
  }
  for (auto [key, field] :
       {std::pair{"name", &suite->name}, std::pair{"description", &suite->description},
        std::pair{"source", &suite->source}}) {
    if (!manifest.contains(key)) continue;
    if (!manifest[key].is_string()) {
      return Status::InvalidArgument(file.string() + ": \"" + key + "\" must be a string");
    }
    *field = manifest[key].get<std::string>();
  }
  return Status::OK();
}

}  // namespace

Status load_suite(const fs::path& dir, Suite* suite) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return Status::NotFound("suite folder " + dir.string() + " does not exist");
  }
  Suite loaded;
  loaded.root = fs::absolute(dir).lexically_normal();
  loaded.name = loaded.root.filename().string();
  if (fs::exists(dir / "suite.json", ec)) {
    Status s = read_manifest(dir / "suite.json", &loaded);
    if (!s.ok()) return s;
  }
  static const std::regex kLevel(R"(level\d+)");
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (entry.is_directory() && std::regex_match(name, kLevel)) {
      add_tasks(entry.path(), name, &loaded.tasks);
    }
  }
  add_tasks(dir, "", &loaded.tasks);
  if (loaded.tasks.empty()) {
    return Status::InvalidArgument("suite folder " + dir.string() +
                                   " has no task files (NAME.py, directly or in levelN/)");
  }
  std::sort(loaded.tasks.begin(), loaded.tasks.end(),
            [](const SuiteTask& a, const SuiteTask& b) { return a.id < b.id; });
  *suite = std::move(loaded);
  return Status::OK();
}

std::vector<Suite> find_suites(const fs::path& root) {
  std::vector<Suite> suites;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    Suite suite;
    if (entry.is_directory() && load_suite(entry.path(), &suite).ok()) {
      suites.push_back(std::move(suite));
    }
  }
  std::sort(suites.begin(), suites.end(),
            [](const Suite& a, const Suite& b) { return a.name < b.name; });
  return suites;
}

fs::path builtin_suite_dir() { return install_root() / "tasks"; }

fs::path imported_suites_dir() { return default_cache_dir() / "suites"; }

Status find_suite(const std::string& which, Suite* suite) {
  std::error_code ec;
  if (std::filesystem::is_directory(which, ec)) return load_suite(which, suite);
  std::vector<Suite> known;
  Suite builtin;
  if (load_suite(builtin_suite_dir(), &builtin).ok()) known.push_back(builtin);
  for (Suite& s : find_suites(imported_suites_dir())) known.push_back(std::move(s));
  std::string names;
  for (Suite& s : known) {
    if (s.name == which) {
      *suite = std::move(s);
      return Status::OK();
    }
    names += (names.empty() ? "" : ", ") + s.name;
  }
  return Status::NotFound("no suite " + which + ": give a folder of tasks, or one of: " + names);
}

Status select_tasks(const Suite& suite, const std::vector<std::string>& patterns,
                    std::vector<SuiteTask>* tasks) {
  tasks->clear();
  for (const SuiteTask& t : suite.tasks) {
    bool keep = patterns.empty();
    for (const std::string& p : patterns) keep = keep || fnmatch(p.c_str(), t.id.c_str(), 0) == 0;
    if (keep) tasks->push_back(t);
  }
  if (tasks->empty()) {
    return Status::InvalidArgument("no task of suite " + suite.name + " matches --filter");
  }
  return Status::OK();
}

}  // namespace cuda_agent
