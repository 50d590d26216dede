/// Runs a child process under limits and captures what it printed. Every stage of an evaluation
/// (compiler, candidate, reference, profiler) runs through this interface, so the limits hold
/// everywhere and tests can substitute a fake.
///
/// Limits: wall time (the whole process group is killed at the deadline), resident memory (a
/// process's own pages, not those mapped from files, summed over the group, sampled), no network (a
/// fresh network namespace where the kernel allows one), read-only paths (a private mount namespace
/// in which each is a read-only bind mount of itself, locked by a user namespace), no core dumps.
/// stdout and stderr go to files, so a chatty child cannot block on a pipe.
#pragma once

#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace cuda_agent {

/// The flag that ends the candidates' fork server's argv (ProcessSpec::fork_server): the trusted
/// server's argv and this. The two start together, the candidates' forked from the trusted one
/// before that one reads any request, so that both cost one import of torch and nothing a trusted
/// request carried lies in the memory a candidate's child is forked from (fork_server.h).
inline constexpr const char* kCandidatesFlag = "--candidates";

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
  /// Files and directories (with everything beneath them, mounts included) that the child and its
  /// descendants may read but not change, even as root: each is bind-mounted read-only onto itself
  /// in a private mount namespace, and the child then runs in a user namespace of its own, where
  /// the kernel locks those mounts (see readonly_mounts.h). It cannot unmount them or remount them
  /// writable, and has no capabilities over processes outside, so it cannot write through their
  /// /proc/<pid>/root either. Root stays uid 0 and keeps reading, writing and executing what root
  /// owns, device files included; files of other users are no longer root's to override.
  /// Resolved to canonical paths before the child starts; paths that do not exist are skipped.
  std::vector<std::filesystem::path> readonly_paths;
  /// Directories that stay writable although they lie beneath one of readonly_paths (a run folder
  /// in the temporary directory, when the run store lives there too): each is bind-mounted onto
  /// itself again, writable, once the read-only mounts are made; the read-only paths beneath it
  /// stay read-only. Paths not beneath a read-only one are left as they are.
  std::vector<std::filesystem::path> writable_paths;
  /// When the kernel refuses the namespaces that readonly_paths needs: true, the command does not
  /// run and the result says why; false, it runs anyway and the result has readonly_enforced false.
  bool require_readonly = true;
  /// A signal the child gets when the thread that started it ends (its parent killed, say), so
  /// that no orphan outlives a killed supervisor: 0 for none.
  int parent_death_signal = 0;
  /// On an interrupt or timeout: 0 kills the process group at once; above 0 sends the child
  /// SIGTERM first and kills the group this many seconds later, so that a child that cleans up
  /// on SIGTERM (a cuda-agent command: its temporary files, its own children) can.
  double term_grace_s = 0;
  /// A harness script: the argv of the fork server that may start it (the interpreter and flags
  /// that argv begins with, then harness/fork_server.py and its flags: --candidates for a
  /// candidate's processes), which forks a Python that has imported torch already rather than
  /// exec a new one (fork_server.h); the child makes its read-only paths itself. Empty, or where
  /// the server cannot start: fork and exec.
  std::vector<std::string> fork_server;
  /// Keys of env that the child reads only once its script runs (the path of a candidate's
  /// kernel library): the fork server starts without them, so calls that differ only in them
  /// share one server; the child gets them.
  std::set<std::string> env_after_imports;
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
  bool readonly_enforced = true;  // false: readonly_paths were left writable; see error
  double wall_s = 0;
  double limit_s = 0;  // the time limit that was exceeded, when timed_out
  long long peak_rss_mb = 0;
  std::string error;  // why it could not start, or why readonly_paths were not enforced

  bool succeeded() const {
    return started && !timed_out && !memory_exceeded && signal == 0 && exit_code == 0;
  }
  /// One sentence: "exited with status 1", "killed by signal 11 (Segmentation fault)",
  /// "timed out after 10.0 s", "exceeded the memory limit of 4096 MB", ...; says so when the
  /// read-only paths were not enforced.
  std::string describe() const;
};

class ProcessRunner {
 public:
  virtual ~ProcessRunner() = default;
  virtual ProcessResult run(const ProcessSpec& spec) = 0;
};

/// fork/exec (or the fork server, ProcessSpec::fork_server) with setpgid, new network and mount
/// namespaces, rlimits and a watchdog loop.
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

/// Whether this process may make paths read-only for a child (ProcessSpec::readonly_paths): a
/// private mount namespace and a user namespace (probed once, on the temporary directory).
bool readonly_isolation_available();

}  // namespace cuda_agent
