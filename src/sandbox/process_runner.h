/// Runs a child process under limits and captures what it printed. Every stage of an evaluation
/// (compiler, candidate, reference, profiler) runs through this interface, so the limits hold
/// everywhere and tests can substitute a fake.
///
/// Limits: wall time (the whole process group is killed at the deadline), resident memory (summed
/// over the process group, sampled), no network (a fresh network namespace where the kernel allows
/// one), no core dumps. stdout and stderr go to files, so a chatty child cannot block on a pipe.
#pragma once

#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace cuda_agent {

struct ProcessSpec {
  std::vector<std::string> argv;
  std::filesystem::path cwd;               // empty: inherit
  std::map<std::string, std::string> env;  // added to (or replacing in) the parent's environment
  double timeout_s = 60;
  long long memory_limit_mb = 0;  // 0: none
  bool isolate_network = true;
  std::filesystem::path stdout_path;  // empty: discarded
  std::filesystem::path stderr_path;  // empty: discarded
  /// A process started early, to load its libraries while the step before it runs, waits for a
  /// release (the harness's --wait-for). Until released_at_ns holds the steady-clock time of the
  /// release, wait_timeout_s bounds it; from the release on, timeout_s does.
  std::shared_ptr<std::atomic<long long>> released_at_ns;
  double wait_timeout_s = 0;
  /// Set to true to kill the process group at once (a step that is no longer needed).
  std::shared_ptr<std::atomic<bool>> cancel;
};

struct ProcessResult {
  bool started = false;  // false: fork or exec failed; see error
  int exit_code = -1;    // valid when the child exited
  int signal = 0;        // nonzero when a signal ended it
  bool timed_out = false;
  bool memory_exceeded = false;
  bool interrupted = false;  // the user interrupted cuda-agent while it ran
  bool cancelled = false;    // killed through ProcessSpec::cancel
  bool network_isolated = false;
  double wall_s = 0;
  double limit_s = 0;  // the time limit that was exceeded, when timed_out
  long long peak_rss_mb = 0;
  std::string error;  // why it could not start

  bool succeeded() const {
    return started && !timed_out && !memory_exceeded && signal == 0 && exit_code == 0;
  }
  /// One sentence: "exited with status 1", "killed by signal 11 (Segmentation fault)",
  /// "timed out after 10.0 s", "exceeded the memory limit of 4096 MB", ...
  std::string describe() const;
};

class ProcessRunner {
 public:
  virtual ~ProcessRunner() = default;
  virtual ProcessResult run(const ProcessSpec& spec) = 0;
};

/// fork/exec with setpgid, a new network namespace, rlimits and a watchdog loop.
class PosixProcessRunner : public ProcessRunner {
 public:
  ProcessResult run(const ProcessSpec& spec) override;
};

/// Set by the SIGINT/SIGTERM handler that the command line installs; a running child's process
/// group is killed and its result marked interrupted.
std::atomic<bool>& interrupt_requested();
void install_interrupt_handlers();

/// Whether this process may create a network namespace (probed once).
bool network_isolation_available();

}  // namespace cuda_agent
