#include "agent/shell_tools.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>

#include "util/files.h"

namespace cuda_agent::agent {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr std::size_t kMaxOutputChars = 30000;
constexpr double kDefaultTimeoutS = 120;
constexpr double kMaxTimeoutS = 600;
constexpr double kBackgroundTimeoutS = 3600;

std::string read_from(const fs::path& path, std::size_t offset, std::size_t* end) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  if (in) {
    in.seekg(static_cast<std::streamoff>(offset));
    text << in.rdbuf();
  }
  std::string s = text.str();
  *end = offset + s.size();
  return s;
}

/// A process spec for a command in the workspace: bash, stderr joined to stdout in one log.
ProcessSpec command_spec(const ToolContext& context, const std::string& command, double timeout_s,
                         const fs::path& log) {
  ProcessSpec spec;
  spec.argv = {"bash", "-c", "exec 2>&1\n" + command};
  spec.cwd = context.paths.root();
  spec.env = context.env;
  spec.timeout_s = timeout_s;
  spec.isolate_network = true;
  spec.readonly_paths = context.readonly_paths;
  spec.require_readonly = false;  // the tools' own path checks still hold where the kernel refuses
  spec.stdout_path = log;
  return spec;
}

ToolOutput run_bash(const json& args, ToolContext& context) {
  std::string command, err;
  if (!required_string(args, "command", &command, &err)) return ToolOutput::fail(err);
  if (command.find_first_not_of(" \t\r\n") == std::string::npos) {
    return ToolOutput::fail("the command is empty");
  }
  if (!context.shells) return ToolOutput::fail("this episode has no shell");
  long timeout_ms = static_cast<long>(kDefaultTimeoutS * 1000);
  bool background = false;
  if (!optional_int(args, "timeout", 1, &timeout_ms, &err) ||
      !optional_bool(args, "run_in_background", &background, &err)) {
    return ToolOutput::fail(err + " (timeout is in milliseconds)");
  }
  const double timeout_s = std::min(timeout_ms / 1000.0, kMaxTimeoutS);
  ShellSessions& shells = *context.shells;
  ProcessSpec spec = command_spec(context, command, background ? kBackgroundTimeoutS : timeout_s,
                                  shells.next_log());
  if (background) {
    std::string id = shells.start(std::move(spec), command);
    return ToolOutput::ok("started in the background as " + id +
                          "; read its output with BashOutput(bash_id=\"" + id +
                          "\"), stop it with KillBash(shell_id=\"" + id + "\")");
  }
  ProcessResult result = shells.runner()->run(spec);
  if (!result.started) return ToolOutput::fail("the command could not start: " + result.error);
  std::string output;
  if (Status s = read_file(spec.stdout_path, &output); !s.ok()) {
    return ToolOutput::fail("the command's output could not be read: " + s.message());
  }
  std::string text = cut_for_model(output, kMaxOutputChars);
  const std::string note = ending_note(result);
  if (!note.empty()) text += (text.empty() || text.back() == '\n' ? "" : "\n") + note;
  if (text.empty()) text = "(no output)";
  return result.succeeded() ? ToolOutput::ok(text) : ToolOutput::fail(text);
}

ToolOutput run_bash_output(const json& args, ToolContext& context) {
  std::string id, err;
  if (!required_string(args, "bash_id", &id, &err)) return ToolOutput::fail(err);
  if (!context.shells) return ToolOutput::fail("this episode has no shell");
  std::optional<std::regex> filter;
  if (args.contains("filter") && args["filter"].is_string() &&
      !args["filter"].get<std::string>().empty()) {
    try {
      filter.emplace(args["filter"].get<std::string>());
    } catch (const std::regex_error& e) {
      return ToolOutput::fail("filter is not a valid regular expression: " + std::string(e.what()));
    }
  }
  ShellSessions::Poll poll = context.shells->poll(id);
  if (!poll.found) return ToolOutput::fail("there is no background shell " + id);
  std::string output = poll.new_output;
  if (filter) {
    std::istringstream lines(output);
    std::string line, kept;
    while (std::getline(lines, line)) {
      if (std::regex_search(line, *filter)) kept += line + "\n";
    }
    output = kept;
  }
  std::string text = "[" + id + ": " + poll.status + "]\n";
  text += output.empty() ? "(no new output)" : cut_for_model(output, kMaxOutputChars);
  return ToolOutput::ok(text);
}

ToolOutput run_kill_bash(const json& args, ToolContext& context) {
  std::string id, err;
  // Both names are in use for the argument; take either.
  if (!required_string(args, args.contains("shell_id") ? "shell_id" : "bash_id", &id, &err)) {
    return ToolOutput::fail("missing required argument \"shell_id\"");
  }
  if (!context.shells) return ToolOutput::fail("this episode has no shell");
  std::string status;
  if (!context.shells->kill(id, &status)) {
    return ToolOutput::fail("there is no background shell " + id);
  }
  return ToolOutput::ok(id + ": " + status);
}

}  // namespace

std::string ending_note(const ProcessResult& result) {
  if (result.timed_out) {
    char text[96];
    std::snprintf(text, sizeof text, "[timed out after %.0f s; the command was killed]",
                  result.limit_s > 0 ? result.limit_s : result.wall_s);
    return text;
  }
  if (result.interrupted) return "[interrupted]";
  if (result.cancelled) return "[killed]";
  if (result.memory_exceeded || result.signal != 0) return "[" + result.describe() + "]";
  if (result.exit_code != 0) return "[exit status " + std::to_string(result.exit_code) + "]";
  return "";
}

ShellSessions::ShellSessions(ProcessRunner* runner, fs::path log_dir)
    : runner_(runner), log_dir_(std::move(log_dir)) {}

ShellSessions::~ShellSessions() {
  std::map<std::string, std::unique_ptr<Shell>> shells;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    shells.swap(shells_);
  }
  for (auto& [id, shell] : shells) {
    shell->cancel->store(true);
    if (shell->waiter.joinable()) shell->waiter.join();
  }
}

fs::path ShellSessions::next_log() {
  std::lock_guard<std::mutex> lock(mutex_);
  return log_dir_ / ("command-" + std::to_string(next_log_++) + ".log");
}

std::string ShellSessions::start(ProcessSpec spec, const std::string& command) {
  auto shell = std::make_unique<Shell>();
  shell->command = command;
  shell->log = spec.stdout_path;
  shell->cancel = std::make_shared<std::atomic<bool>>(false);
  shell->done = std::make_shared<std::atomic<bool>>(false);
  shell->result = std::make_shared<ProcessResult>();
  spec.cancel = shell->cancel;
  // Created now, so a poll before the process writes finds an empty log, not a missing one.
  std::ofstream(shell->log).flush();
  shell->waiter = std::thread([runner = runner_, spec, done = shell->done, result = shell->result] {
    *result = runner->run(spec);
    done->store(true);
  });
  std::lock_guard<std::mutex> lock(mutex_);
  std::string id = "bash_" + std::to_string(next_id_++);
  shells_[id] = std::move(shell);
  return id;
}

ShellSessions::Poll ShellSessions::poll(const std::string& id) {
  std::lock_guard<std::mutex> lock(mutex_);
  Poll poll;
  auto it = shells_.find(id);
  if (it == shells_.end()) return poll;
  Shell& shell = *it->second;
  poll.found = true;
  // Whether it had ended is read before the output, so the output of an ended shell is whole.
  const bool done = shell.done->load();
  poll.new_output = read_from(shell.log, shell.read_to, &shell.read_to);
  poll.running = !done;
  if (!done) {
    poll.status = "running";
  } else {
    std::string note = ending_note(*shell.result);
    poll.status = note.empty() ? "exited with status 0" : note.substr(1, note.size() - 2);
  }
  return poll;
}

bool ShellSessions::kill(const std::string& id, std::string* status) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto it = shells_.find(id);
  if (it == shells_.end()) return false;
  Shell& shell = *it->second;
  if (shell.done->load()) {
    *status = "had already ended (" +
              std::string(shell.result->succeeded() ? "exit status 0" : shell.result->describe()) +
              ")";
    return true;
  }
  shell.cancel->store(true);
  lock.unlock();
  if (shell.waiter.joinable()) shell.waiter.join();
  *status = "killed";
  return true;
}

std::size_t ShellSessions::running() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::count_if(shells_.begin(), shells_.end(),
                       [](const auto& entry) { return !entry.second->done->load(); });
}

void add_shell_tools(ToolRegistry* registry) {
  registry->add(
      {"Bash",
       "Runs a bash command in the workspace folder and returns its output (stdout and stderr "
       "together, long output cut in the middle) and its exit status. Use it to build, verify "
       "and profile: `python utils/compile.py`, `python utils/verify.py`, "
       "`python utils/profile.py`. There is no network. The timeout is in milliseconds "
       "(default 120000, at most 600000). With run_in_background the command's id comes back "
       "at once; read its output with BashOutput and stop it with KillBash.",
       {{"type", "object"},
        {"properties",
         {{"command", {{"type", "string"}, {"description", "the command to run"}}},
          {"timeout",
           {{"type", "number"}, {"description", "milliseconds before it is killed (max 600000)"}}},
          {"description",
           {{"type", "string"}, {"description", "what the command does, in a few words"}}},
          {"run_in_background",
           {{"type", "boolean"},
            {"description", "start it and return at once; read it with BashOutput"}}}}},
        {"required", {"command"}}},
       true,
       run_bash});
  registry->add(
      {"BashOutput",
       "Returns the output a background shell wrote since the last read, and whether it is "
       "still running or how it ended.",
       {{"type", "object"},
        {"properties",
         {{"bash_id", {{"type", "string"}, {"description", "the id Bash returned"}}},
          {"filter",
           {{"type", "string"},
            {"description", "a regular expression: only lines that match are shown"}}}}},
        {"required", {"bash_id"}}},
       false,
       run_bash_output});
  registry->add({"KillBash",
                 "Stops a background shell and everything it started.",
                 {{"type", "object"},
                  {"properties",
                   {{"shell_id", {{"type", "string"}, {"description", "the id Bash returned"}}}}},
                  {"required", {"shell_id"}}},
                 true,
                 run_kill_bash});
}

}  // namespace cuda_agent::agent
