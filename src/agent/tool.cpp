#include "agent/tool.h"

#include <algorithm>
#include <cmath>

#include "workspace/workspace.h"

namespace cuda_agent::agent {

namespace fs = std::filesystem;

namespace {

bool inside(const fs::path& path, const fs::path& folder) {
  auto p = path.begin();
  for (auto f = folder.begin(); f != folder.end(); ++f, ++p) {
    if (p == path.end() || *p != *f) return false;
  }
  return true;
}

}  // namespace

WorkspacePaths::WorkspacePaths(const fs::path& root) {
  std::error_code ec;
  root_ = fs::canonical(root, ec);
  if (ec) root_ = fs::absolute(root).lexically_normal();
}

bool WorkspacePaths::resolve(const std::string& path, bool for_write, fs::path* out,
                             std::string* err) const {
  if (path.empty()) {
    *err = "the path is empty; give a file in the workspace, e.g. kernels/add.cu";
    return false;
  }
  if (path.find('\0') != std::string::npos) {
    *err = "the path holds a NUL character";
    return false;
  }
  fs::path given(path);
  fs::path absolute = given.is_absolute() ? given : root_ / given;
  std::error_code ec;
  // Links in the parts that exist are followed, so a link cannot lead outside unseen.
  fs::path resolved = fs::weakly_canonical(absolute, ec);
  if (ec) resolved = absolute.lexically_normal();
  // A link whose target does not exist yet is left unresolved above: follow it by hand, so that
  // a write through it cannot land outside.
  for (int hops = 0; hops < 40 && fs::is_symlink(fs::symlink_status(resolved, ec)); ++hops) {
    fs::path target = fs::read_symlink(resolved, ec);
    if (ec) break;
    resolved =
        fs::weakly_canonical(target.is_absolute() ? target : resolved.parent_path() / target, ec);
    if (ec) break;
  }
  if (!inside(resolved, root_)) {
    *err = "path " + path + " is outside the workspace " + root_.string() +
           "; every tool works inside it (use a path relative to it, e.g. kernels/add.cu)";
    return false;
  }
  if (for_write && read_only(resolved)) {
    *err = relative(resolved) +
           " is read-only infrastructure (SKILL.md, model.py, utils/ and .cuda-agent/ cannot be "
           "changed); write your implementation in model_new.py and kernels/";
    return false;
  }
  *out = resolved;
  return true;
}

std::string WorkspacePaths::relative(const fs::path& path) const {
  if (!inside(path, root_)) return path.string();
  fs::path rel = path.lexically_relative(root_);
  return rel.empty() || rel == "." ? "." : rel.string();
}

bool WorkspacePaths::read_only(const fs::path& path) const {
  for (const std::string& entry : read_only_entries()) {
    if (inside(path, root_ / entry)) return true;
  }
  return false;
}

void ToolRegistry::add(Tool tool) {
  auto same = [&](const Tool& t) { return t.name == tool.name; };
  tools_.erase(std::remove_if(tools_.begin(), tools_.end(), same), tools_.end());
  tools_.push_back(std::move(tool));
}

const Tool* ToolRegistry::find(const std::string& name) const {
  for (const Tool& t : tools_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::vector<std::string> ToolRegistry::names() const {
  std::vector<std::string> names;
  for (const Tool& t : tools_) names.push_back(t.name);
  return names;
}

nlohmann::json ToolRegistry::specs() const {
  nlohmann::json specs = nlohmann::json::array();
  for (const Tool& t : tools_) {
    specs.push_back(
        {{"type", "function"},
         {"function",
          {{"name", t.name}, {"description", t.description}, {"parameters", t.parameters}}}});
  }
  return specs;
}

std::string cut_for_model(const std::string& text, std::size_t max_chars) {
  if (text.size() <= max_chars) return text;
  const std::size_t keep = max_chars / 2;
  std::size_t head = keep, tail = text.size() - keep;
  // Never inside a UTF-8 character: back up over continuation bytes.
  auto continuation = [&](std::size_t i) {
    return i < text.size() && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80;
  };
  while (head > 0 && continuation(head)) --head;
  while (tail > head && continuation(tail)) --tail;
  // Cut at line ends where one is near, so the model reads whole lines.
  if (std::size_t nl = text.rfind('\n', head); nl != std::string::npos && nl > keep / 2) {
    head = nl + 1;
  }
  if (std::size_t nl = text.find('\n', tail); nl != std::string::npos && nl < tail + keep / 2) {
    tail = nl + 1;
  }
  return text.substr(0, head) + "\n[... " + std::to_string(tail - head) + " of " +
         std::to_string(text.size()) + " characters left out ...]\n" + text.substr(tail);
}

bool required_string(const nlohmann::json& args, const std::string& key, std::string* value,
                     std::string* err) {
  auto it = args.find(key);
  if (it == args.end() || it->is_null()) {
    *err = "missing required argument \"" + key + "\"";
    return false;
  }
  if (!it->is_string()) {
    *err = "argument \"" + key + "\" must be a string, not " + std::string(it->type_name());
    return false;
  }
  *value = it->get<std::string>();
  return true;
}

nlohmann::json schema_property(const char* type, const char* description) {
  return {{"type", type}, {"description", description}};
}

bool optional_int(const nlohmann::json& args, const std::string& key, long min, long* value,
                  std::string* err) {
  auto it = args.find(key);
  if (it == args.end() || it->is_null()) return true;
  long v = 0;
  if (it->is_number_integer()) {
    v = it->get<long>();
  } else if (it->is_number_float() && std::floor(it->get<double>()) == it->get<double>()) {
    v = static_cast<long>(it->get<double>());
  } else if (it->is_string() && !it->get<std::string>().empty() &&
             it->get<std::string>().size() < 10 &&
             it->get<std::string>().find_first_not_of("0123456789") == std::string::npos) {
    v = std::stol(it->get<std::string>());
  } else {
    *err = "argument \"" + key + "\" must be an integer, not " + it->dump();
    return false;
  }
  if (v < min) {
    *err = "argument \"" + key + "\" must be at least " + std::to_string(min) + ", not " +
           std::to_string(v);
    return false;
  }
  *value = v;
  return true;
}

bool optional_bool(const nlohmann::json& args, const std::string& key, bool* value,
                   std::string* err) {
  auto it = args.find(key);
  if (it == args.end() || it->is_null()) return true;
  if (it->is_boolean()) {
    *value = it->get<bool>();
  } else if (it->is_string() && (*it == "true" || *it == "false")) {
    *value = *it == "true";
  } else {
    *err = "argument \"" + key + "\" must be true or false, not " + it->dump();
    return false;
  }
  return true;
}

bool optional_string(const nlohmann::json& args, const std::string& key, std::string* value,
                     std::string* err) {
  auto it = args.find(key);
  if (it == args.end() || it->is_null()) return true;
  return required_string(args, key, value, err);
}

ToolRegistry default_tools() {
  ToolRegistry registry;
  add_shell_tools(&registry);
  add_search_tools(&registry);
  add_file_tools(&registry);
  return registry;
}

}  // namespace cuda_agent::agent
