#include "sandbox/process_runner.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>

#include "sandbox/fork_server.h"
#include "sandbox/readonly_mounts.h"

namespace cuda_agent {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<bool> g_interrupt{false};

void on_interrupt(int) { g_interrupt.store(true); }

/// A process's own resident memory in KiB: anonymous and shared-memory pages (RssAnon +
/// RssShmem in /proc/PID/status). Pages mapped from files (a library's code, a memory-mapped
/// bundle of input sets) are the page cache's and are not counted.
long long own_resident_kb(const std::string& pid) {
  std::ifstream status("/proc/" + pid + "/status");
  long long total_kb = 0;
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("RssAnon:", 0) == 0 || line.rfind("RssShmem:", 0) == 0) {
      total_kb += std::atoll(line.c_str() + line.find(':') + 1);
    }
  }
  return total_kb;
}

/// Resident memory of every process in the group, in MiB, read from /proc.
long long group_rss_mb(pid_t pgid) {
  long long total_kb = 0;
  DIR* proc = opendir("/proc");
  if (!proc) return 0;
  while (dirent* entry = readdir(proc)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    std::ifstream stat(std::string("/proc/") + entry->d_name + "/stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // Fields after the command name, which is in parentheses and may hold spaces.
    std::size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(line.substr(close + 2));
    std::string state;
    long long ppid = 0, pgrp = 0;
    fields >> state >> ppid >> pgrp;
    if (pgrp != pgid) continue;
    total_kb += own_resident_kb(entry->d_name);
  }
  closedir(proc);
  return total_kb / 1024;
}

int open_output(const std::filesystem::path& path) {
  if (path.empty()) return ::open("/dev/null", O_WRONLY);
  return ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
}

void write_all(int fd, const char* text, std::size_t size) {
  ssize_t ignored = write(fd, text, size);
  (void)ignored;
}

/// In the child, between fork and exec: only async-signal-safe calls, then exec or _exit(127).
[[noreturn]] void exec_child(const ProcessSpec& spec, const std::vector<char*>& argv,
                             const std::vector<char*>& envp, int out_fd, int err_fd,
                             bool isolate_network, const ReadonlyPlan& readonly, int report_fd) {
  setpgid(0, 0);
  if (spec.parent_death_signal != 0) prctl(PR_SET_PDEATHSIG, spec.parent_death_signal);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGINT, &dfl, nullptr);
  sigaction(SIGTERM, &dfl, nullptr);
  if (readonly.paths.empty()) {
    if (isolate_network) unshare(CLONE_NEWNET);
  } else {
    ReadonlyReport report;
    enter_readonly_namespace(readonly, spec.isolate_network, &report);
    if (report.error != 0 && !report.network_isolated && isolate_network)
      report.network_isolated = unshare(CLONE_NEWNET) == 0;
    write_all(report_fd, reinterpret_cast<const char*>(&report), sizeof report);
    if (report.error != 0 && spec.require_readonly) {
      const std::string& path = report.failed == ReadonlyReport::Step::kWritable
                                    ? readonly.writable[std::max(report.failed_path, 0)]
                                    : readonly.paths[std::max(report.failed_path, 0)];
      const char before[] = "cuda-agent sandbox: could not make ";
      const char* after = readonly_failure_suffix(report);
      write_all(err_fd, before, sizeof before - 1);
      write_all(err_fd, path.data(), path.size());
      write_all(err_fd, after, std::strlen(after));
      _exit(127);
    }
  }
  struct rlimit no_core = {0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  // After the mounts, so that a working directory under a read-only path is on the read-only mount.
  if (!spec.cwd.empty() && chdir(spec.cwd.c_str()) != 0) _exit(126);
  int null_in = ::open("/dev/null", O_RDONLY);
  dup2(null_in, 0);
  dup2(out_fd, 1);
  dup2(err_fd, 2);
  execvpe(argv[0], argv.data(), envp.data());
  const char msg[] = "cuda-agent sandbox: exec failed\n";
  write_all(2, msg, sizeof msg - 1);
  _exit(127);
}

/// The first sentence of ProcessResult::describe(), for a process that started.
std::string describe_outcome(const ProcessResult& result) {
  char buffer[160];
  if (result.interrupted) return "interrupted";
  if (result.cancelled) return "cancelled";
  if (result.timed_out) {
    std::snprintf(buffer, sizeof buffer, "timed out after %.1f s and was killed", result.limit_s);
    return buffer;
  }
  if (result.memory_exceeded) {
    std::snprintf(buffer, sizeof buffer,
                  "exceeded its memory limit (%lld MB resident) and was killed",
                  result.peak_rss_mb);
    return buffer;
  }
  if (result.signal != 0) {
    std::snprintf(buffer, sizeof buffer, "killed by signal %d (%s)", result.signal,
                  strsignal(result.signal));
    return buffer;
  }
  if (result.exit_code == 127) return "exited with status 127 (the program was not found)";
  return "exited with status " + std::to_string(result.exit_code);
}

/// The watchdog: until ended(&status) says the child (and process group) pid is over, samples
/// its memory, and kills the group at the deadline, over the memory limit, on an interrupt or a
/// cancel. Fills in *result's outcome.
void watch(const ProcessSpec& spec, pid_t pid, Clock::time_point start,
           const std::function<bool(int*)>& ended, ProcessResult* out) {
  ProcessResult& result = *out;
  auto limit = [](double seconds) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  };
  // The deadline, and the limit it enforces, as of now (a gated process's moves at its release).
  auto deadline = [&]() -> std::pair<Clock::time_point, double> {
    if (!spec.released_at_ns) return {start + limit(spec.timeout_s), spec.timeout_s};
    long long released = spec.released_at_ns->load();
    if (released == 0) return {start + limit(spec.wait_timeout_s), spec.wait_timeout_s};
    return {Clock::time_point(std::chrono::nanoseconds(released)) + limit(spec.timeout_s),
            spec.timeout_s};
  };
  auto next_sample = start;
  int status = 0;
  bool killed = false;
  std::optional<Clock::time_point> termed;  // when SIGTERM went, with a grace period
  while (true) {
    if (ended(&status)) break;
    auto now = Clock::now();
    if (!killed) {
      if (now >= next_sample) {
        long long rss = group_rss_mb(pid);
        if (rss > result.peak_rss_mb) result.peak_rss_mb = rss;
        if (spec.memory_limit_mb > 0 && rss > spec.memory_limit_mb) result.memory_exceeded = true;
        next_sample = now + std::chrono::milliseconds(200);
      }
      if (auto [at, seconds] = deadline(); now >= at) {
        result.timed_out = true;
        result.limit_s = seconds;
      }
      if (g_interrupt.load()) result.interrupted = true;
      if (spec.cancel && spec.cancel->load()) result.cancelled = true;
      if (result.timed_out || result.memory_exceeded || result.interrupted || result.cancelled) {
        if (spec.term_grace_s > 0 && !termed && !result.memory_exceeded) {
          kill(pid, SIGTERM);
          termed = now;
        } else if (!termed || now - *termed >= std::chrono::duration<double>(spec.term_grace_s)) {
          kill(-pid, SIGKILL);
          killed = true;
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(killed ? 5 : 10));
  }
  // Anything the child left running in its group goes with it.
  kill(-pid, SIGKILL);
  result.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status) && !killed) result.signal = WTERMSIG(status);
}

}  // namespace

std::atomic<bool>& interrupt_requested() { return g_interrupt; }

void install_interrupt_handlers() {
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

bool network_isolation_available() {
  static const bool available = [] {
    pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) _exit(unshare(CLONE_NEWNET) == 0 ? 0 : 1);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }();
  return available;
}

bool readonly_isolation_available() {
  static const bool available = probe_readonly_isolation();
  return available;
}

std::string ProcessResult::describe() const {
  if (!started) return "could not start: " + error;
  std::string sentence = describe_outcome(*this);
  if (!readonly_enforced)
    sentence += "; its read-only paths were left writable (" +
                (error.empty() ? std::string("no reason given") : error) + ")";
  return sentence;
}

ProcessResult PosixProcessRunner::run(const ProcessSpec& spec) {
  ProcessResult result;
  if (spec.argv.empty()) {
    result.error = "no command given";
    return result;
  }
  // Everything the child needs is built before fork.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    std::string entry(*e);
    std::string key = entry.substr(0, entry.find('='));
    if (!spec.env.count(key)) env_strings.push_back(entry);
  }
  for (const auto& [key, value] : spec.env) env_strings.push_back(key + "=" + value);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_strings = spec.argv;
  std::vector<char*> argv;
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);

  bool isolate = spec.isolate_network && network_isolation_available();
  // The child makes its paths read-only itself and says how that went, the report read once
  // the child is gone.
  ReadonlyPlan readonly;
  std::string plan_error;
  if (!plan_readonly(spec.readonly_paths, &readonly, &plan_error, spec.writable_paths)) {
    result.readonly_enforced = false;
    result.error = plan_error;
    if (spec.require_readonly) return result;
  }
  const auto take_report = [&](const ReadonlyReport& report) {
    result.network_isolated = report.network_isolated;
    if (report.error != 0) {
      result.readonly_enforced = false;
      result.error = describe_readonly_failure(readonly, report);
      if (spec.require_readonly) result.started = false;
    }
  };
  if (!spec.fork_server.empty() && fork_server_enabled()) {
    ForkedChild child;
    std::string why;  // the server could not start it: fork and exec instead
    auto start = Clock::now();
    if (fork_from_server(spec, env_strings, isolate, &readonly, &child, &why)) {
      result.started = true;
      result.network_isolated = isolate;
      watch(
          spec, child.pid, start, [&](int* status) { return forked_child_ended(&child, status); },
          &result);
      // No report: the child was killed before it got that far, and so never ran the command.
      if (child.readonly_reported) take_report(child.readonly);
      return result;
    }
  }

  int out_fd = open_output(spec.stdout_path);
  int err_fd = open_output(spec.stderr_path);
  if (out_fd < 0 || err_fd < 0) {
    result.error = "cannot open the output files: " + std::string(std::strerror(errno));
    if (out_fd >= 0) close(out_fd);
    if (err_fd >= 0) close(err_fd);
    return result;
  }
  int report_pipe[2] = {-1, -1};
  if (!readonly.paths.empty() && pipe2(report_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    result.error = std::string("cannot create a pipe: ") + std::strerror(errno);
    close(out_fd);
    close(err_fd);
    return result;
  }
  auto start = Clock::now();
  pid_t pid = fork();
  if (pid < 0) {
    result.error = std::string("fork failed: ") + std::strerror(errno);
    close(out_fd);
    close(err_fd);
    for (int fd : report_pipe) {
      if (fd >= 0) close(fd);
    }
    return result;
  }
  if (pid == 0) {
    exec_child(spec, argv, envp, out_fd, err_fd, isolate, readonly, report_pipe[1]);
  }
  setpgid(pid, pid);  // also in the parent, so the group exists before we signal it
  close(out_fd);
  close(err_fd);
  if (report_pipe[1] >= 0) close(report_pipe[1]);
  result.started = true;
  result.network_isolated = isolate;
  watch(
      spec, pid, start, [pid](int* status) { return waitpid(pid, status, WNOHANG) == pid; },
      &result);
  if (report_pipe[0] >= 0) {
    // No report: the child was killed before it got that far, and so never ran the command.
    ReadonlyReport report;
    if (read(report_pipe[0], &report, sizeof report) == static_cast<ssize_t>(sizeof report))
      take_report(report);
    close(report_pipe[0]);
  }
  return result;
}

}  // namespace cuda_agent
