#include "workspace/workspace.h"

#include <nlohmann/json.hpp>
#include <set>

#include "util/files.h"
#include "util/hash.h"

namespace cuda_agent {
namespace {

namespace fs = std::filesystem;

/// Infrastructure copied from the templates, relative to the workspace root.
const char* kInfrastructure[] = {
    "SKILL.md",        "utils/__init__.py", "utils/kernels.py", "utils/compile.py",
    "utils/verify.py", "utils/profile.py",  "utils/_stage.py",  "utils/profile_model.py",
};

Status make_read_only(const fs::path& path) {
  std::error_code ec;
  fs::permissions(path, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read,
                  fs::perm_options::replace, ec);
  if (ec) return Status::IoError(path.string() + ": " + ec.message());
  return Status::OK();
}

Status checksum(const fs::path& path, std::string* sha) {
  std::string contents;
  Status s = read_file(path, &contents);
  if (!s.ok()) return s;
  *sha = sha256_hex(contents);
  return Status::OK();
}

}  // namespace

const std::vector<std::string>& read_only_entries() {
  static const std::vector<std::string> entries = {"SKILL.md", "model.py", "utils", ".cuda-agent"};
  return entries;
}

std::string workspace_key(const fs::path& dir) {
  std::error_code ec;
  fs::path canonical = fs::weakly_canonical(fs::absolute(dir), ec);
  return (ec ? fs::absolute(dir) : canonical).string();
}

Status init_workspace(const Task& task, const fs::path& dir, const InitOptions& options,
                      Store* store, WorkspaceRecord* record) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_empty(dir, ec)) {
    return Status::InvalidArgument("workspace folder " + dir.string() +
                                   " is not empty; choose a new folder");
  }
  fs::create_directories(dir / "utils", ec);
  fs::create_directories(dir / "kernels", ec);
  fs::create_directories(dir / ".cuda-agent", ec);
  if (ec) return Status::IoError("cannot create " + dir.string() + ": " + ec.message());

  nlohmann::json checksums = nlohmann::json::object();
  for (const char* relative : kInfrastructure) {
    std::string contents;
    Status s = read_file(options.template_dir / relative, &contents);
    if (!s.ok()) return Status::NotFound("workspace template missing: " + s.message());
    s = write_file_atomic(dir / relative, contents);
    if (!s.ok()) return s;
    checksums[relative] = sha256_hex(contents);
  }
  Status s = write_file_atomic(dir / "model.py", task.source);
  if (!s.ok()) return s;
  checksums["model.py"] = sha256_hex(task.source);

  std::string model_new;
  s = read_file(options.template_dir / "model_new.py", &model_new);
  if (!s.ok()) return Status::NotFound("workspace template missing: " + s.message());
  s = write_file_atomic(dir / "model_new.py", model_new);
  if (!s.ok()) return s;

  std::string key = workspace_key(dir);
  nlohmann::json config = {
      {"binary", options.binary.string()},
      {"store", (options.store.empty() ? store->path() : options.store).string()},
      {"device", options.device},
      {"shrink", options.shrink},
      {"precision", options.precision},
      {"harness", options.template_dir.parent_path().string()},
      {"task", task.path.string()}};
  s = write_file_atomic(dir / ".cuda-agent" / "workspace.json", config.dump(2) + "\n");
  if (!s.ok()) return s;

  for (const auto& [relative, sha] : checksums.items()) {
    s = make_read_only(dir / relative);
    if (!s.ok()) return s;
  }
  *record =
      WorkspaceRecord{key, task.path.string(), task.sha256, task.source, options.device, checksums};
  return store->put_workspace(*record);
}

Status verify_workspace(const fs::path& dir, Store* store, WorkspaceRecord* record) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return Status::InvalidArgument("workspace " + dir.string() + " is not a folder");
  }
  Status s = store->get_workspace(workspace_key(dir), record);
  if (!s.ok()) return s;
  std::set<std::string> expected;
  for (const auto& [relative, sha] : record->checksums.items()) {
    expected.insert(relative);
    std::string actual;
    s = checksum(dir / relative, &actual);
    if (!s.ok())
      return Status::Corruption("read-only file " + relative + " is missing from the workspace");
    if (actual != sha.get<std::string>()) {
      return Status::Corruption("read-only file " + relative +
                                " was modified; infrastructure files must stay as laid out");
    }
  }
  for (const auto& entry : fs::directory_iterator(dir / "utils", ec)) {
    std::string relative = "utils/" + entry.path().filename().string();
    if (entry.path().filename() == "__pycache__") continue;
    if (!expected.count(relative)) {
      return Status::Corruption(
          "file " + relative +
          " was added to the read-only utils/ folder; put your code in kernels/"
          " or model_new.py");
    }
  }
  return Status::OK();
}

}  // namespace cuda_agent
