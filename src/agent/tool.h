/// The tools an agent acts through, and the sandbox they act in. A tool is a name, a description
/// and a JSON schema the model reads, and a handler that runs a call's arguments inside one
/// episode's workspace. An error the model can fix (a bad path, a non-unique match, a command that
/// failed) is an output marked as an error, never an exception: it goes back to the model as the
/// tool's message.
///
/// Every path a tool takes is the workspace's: relative to its root, or absolute inside it. A
/// path outside it, or one that leads outside through a symbolic link, is refused; so is a write
/// to the read-only infrastructure (SKILL.md, model.py, utils/, .cuda-agent/).
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cuda_agent::agent {

/// What a call gives back to the model.
struct ToolOutput {
  std::string text;
  bool error = false;

  static ToolOutput ok(std::string text) { return {std::move(text), false}; }
  static ToolOutput fail(std::string text) { return {std::move(text), true}; }
};

/// The paths of one workspace, and the rule for which of them a tool may touch.
class WorkspacePaths {
 public:
  /// root must exist; it is made canonical.
  explicit WorkspacePaths(const std::filesystem::path& root);

  const std::filesystem::path& root() const { return root_; }

  /// *out: the absolute path that path (relative to the root, or absolute) names, with its
  /// existing parts' links resolved. False, with *err a sentence the model can act on, when it
  /// lies outside the workspace, or, for_write, inside the read-only infrastructure.
  bool resolve(const std::string& path, bool for_write, std::filesystem::path* out,
               std::string* err) const;

  /// path relative to the root ("kernels/add.cpp"), for messages; path itself when outside.
  std::string relative(const std::filesystem::path& path) const;

  /// Whether the absolute path lies in the read-only infrastructure.
  bool read_only(const std::filesystem::path& path) const;

 private:
  std::filesystem::path root_;
};

class ShellSessions;  // background shells (shell_tools.h)

/// What a tool's handler may use: the workspace's paths, and the state that lives as long as the
/// episode (background shells).
struct ToolContext {
  WorkspacePaths paths;
  /// Environment added to commands the Bash tool runs (the episode's store and build cache).
  std::map<std::string, std::string> env;
  /// Paths that commands may read but not write (the read-only infrastructure, the run store, the
  /// trusted harness), enforced by the process sandbox where the kernel allows it.
  std::vector<std::filesystem::path> readonly_paths;
  std::shared_ptr<ShellSessions> shells;
};

struct Tool {
  std::string name;
  std::string description;
  nlohmann::json parameters;  // a JSON schema of type "object"
  bool mutates = false;       // whether it may change the workspace
  std::function<ToolOutput(const nlohmann::json& arguments, ToolContext& context)> run;
};

/// The tools of an episode, by name, in the order they were added.
class ToolRegistry {
 public:
  void add(Tool tool);
  /// Null when there is no tool of that name.
  const Tool* find(const std::string& name) const;
  const std::vector<Tool>& tools() const { return tools_; }
  std::vector<std::string> names() const;
  /// The Chat Completions `tools` array: [{"type": "function", "function": {name, description,
  /// parameters}}].
  nlohmann::json specs() const;

 private:
  std::vector<Tool> tools_;
};

/// Output for the model: at most max_chars, cut in the middle, keeping the head and the tail,
/// with a marker that says how much was left out of how much. Text that fits is unchanged.
std::string cut_for_model(const std::string& text, std::size_t max_chars);

/// Reads an argument the schema requires: false with *err naming it when it is missing or of the
/// wrong JSON type.
bool required_string(const nlohmann::json& args, const std::string& key, std::string* value,
                     std::string* err);

/// Optional arguments: *value keeps its default when the argument is absent or null. Models that
/// write their calls as text often quote numbers and booleans, so "10" and "true" are taken too;
/// anything else of the wrong type is false with *err naming the argument.
bool optional_int(const nlohmann::json& args, const std::string& key, long min, long* value,
                  std::string* err);
bool optional_bool(const nlohmann::json& args, const std::string& key, bool* value,
                   std::string* err);
bool optional_string(const nlohmann::json& args, const std::string& key, std::string* value,
                     std::string* err);

/// {"type": type, "description": description}, a property of a tool's schema.
nlohmann::json schema_property(const char* type, const char* description);

/// The tools that read and change files: Read, Write, Edit, MultiEdit, NotebookEdit
/// (file_tools.cpp).
void add_file_tools(ToolRegistry* registry);
/// The tools that find files and text: Glob, Grep (search_tools.cpp).
void add_search_tools(ToolRegistry* registry);
/// The shell: Bash, BashOutput, KillBash (shell_tools.cpp).
void add_shell_tools(ToolRegistry* registry);
/// Every tool above, in the CUDA-Agent paper's order.
ToolRegistry default_tools();

}  // namespace cuda_agent::agent
