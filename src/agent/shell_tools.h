/// The shell of an episode: commands the Bash tool runs in the workspace through the process
/// sandbox (a time limit, no network, the infrastructure read-only), and the background shells
/// that BashOutput reads and KillBash stops. A background shell writes to a log file; reading its
/// output is reading that file from where the last read stopped; killing it kills its process
/// group. Every shell still running when the episode ends is killed.
#pragma once

#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "agent/tool.h"
#include "sandbox/process_runner.h"

namespace cuda_agent::agent {

class ShellSessions {
 public:
  /// Logs of commands go to log_dir, which must exist and lie outside the workspace.
  ShellSessions(ProcessRunner* runner, std::filesystem::path log_dir);
  ~ShellSessions();  // kills what still runs, and waits for it
  ShellSessions(const ShellSessions&) = delete;
  ShellSessions& operator=(const ShellSessions&) = delete;

  ProcessRunner* runner() const { return runner_; }
  /// A fresh log file's path for a command.
  std::filesystem::path next_log();

  /// Starts spec in the background; returns its id ("bash_1", ...).
  std::string start(ProcessSpec spec, const std::string& command);
  struct Poll {
    bool found = false;
    bool running = false;
    std::string status;      // "running", or how it ended
    std::string new_output;  // since the last poll
  };
  Poll poll(const std::string& id);
  /// False when there is no shell of that id; a shell that had ended already is not an error.
  bool kill(const std::string& id, std::string* status);
  std::size_t running() const;

 private:
  struct Shell {
    std::string command;
    std::filesystem::path log;
    std::size_t read_to = 0;
    std::shared_ptr<std::atomic<bool>> cancel;
    std::shared_ptr<std::atomic<bool>> done;
    std::shared_ptr<ProcessResult> result;  // valid once done
    std::thread waiter;
  };
  ProcessRunner* runner_;
  std::filesystem::path log_dir_;
  mutable std::mutex mutex_;
  std::map<std::string, std::unique_ptr<Shell>> shells_;
  int next_id_ = 1;
  int next_log_ = 1;
};

/// How a finished command ended, for the model: "" for exit status 0, else "[exit status 2]",
/// "[timed out after 120 s; the command was killed]", ...
std::string ending_note(const ProcessResult& result);

}  // namespace cuda_agent::agent
