#include "sandbox/process_runner.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace cuda_agent {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<bool> g_interrupt{false};

void on_interrupt(int) { g_interrupt.store(true); }

/// Resident memory of every process in the group, in MiB, read from /proc.
long long group_rss_mb(pid_t pgid) {
  static const long page_kb = sysconf(_SC_PAGESIZE) / 1024;
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
    std::ifstream statm(std::string("/proc/") + entry->d_name + "/statm");
    long long size = 0, resident = 0;
    if (statm >> size >> resident) total_kb += resident * page_kb;
  }
  closedir(proc);
  return total_kb / 1024;
}

int open_output(const std::filesystem::path& path) {
  if (path.empty()) return ::open("/dev/null", O_WRONLY);
  return ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
}

/// In the child, between fork and exec: only async-signal-safe calls, then exec or _exit(127).
[[noreturn]] void exec_child(const ProcessSpec& spec, const std::vector<char*>& argv,
                             const std::vector<char*>& envp, int out_fd, int err_fd,
                             bool isolate_network) {
  setpgid(0, 0);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGINT, &dfl, nullptr);
  sigaction(SIGTERM, &dfl, nullptr);
  if (isolate_network) unshare(CLONE_NEWNET);
  struct rlimit no_core = {0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  if (!spec.cwd.empty() && chdir(spec.cwd.c_str()) != 0) _exit(126);
  int null_in = ::open("/dev/null", O_RDONLY);
  dup2(null_in, 0);
  dup2(out_fd, 1);
  dup2(err_fd, 2);
  execvpe(argv[0], argv.data(), envp.data());
  const char msg[] = "cuda-agent sandbox: exec failed\n";
  ssize_t ignored = write(2, msg, sizeof msg - 1);
  (void)ignored;
  _exit(127);
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

std::string ProcessResult::describe() const {
  char buffer[160];
  if (!started) return "could not start: " + error;
  if (interrupted) return "interrupted";
  if (cancelled) return "cancelled";
  if (timed_out) {
    std::snprintf(buffer, sizeof buffer, "timed out after %.1f s and was killed", limit_s);
    return buffer;
  }
  if (memory_exceeded) {
    std::snprintf(buffer, sizeof buffer,
                  "exceeded its memory limit (%lld MB resident) and was killed", peak_rss_mb);
    return buffer;
  }
  if (signal != 0) {
    std::snprintf(buffer, sizeof buffer, "killed by signal %d (%s)", signal, strsignal(signal));
    return buffer;
  }
  if (exit_code == 127) return "exited with status 127 (the program was not found)";
  return "exited with status " + std::to_string(exit_code);
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

  int out_fd = open_output(spec.stdout_path);
  int err_fd = open_output(spec.stderr_path);
  if (out_fd < 0 || err_fd < 0) {
    result.error = "cannot open the output files: " + std::string(std::strerror(errno));
    if (out_fd >= 0) close(out_fd);
    if (err_fd >= 0) close(err_fd);
    return result;
  }
  bool isolate = spec.isolate_network && network_isolation_available();
  auto start = Clock::now();
  pid_t pid = fork();
  if (pid < 0) {
    result.error = std::string("fork failed: ") + std::strerror(errno);
    close(out_fd);
    close(err_fd);
    return result;
  }
  if (pid == 0) exec_child(spec, argv, envp, out_fd, err_fd, isolate);
  setpgid(pid, pid);  // also in the parent, so the group exists before we signal it
  close(out_fd);
  close(err_fd);
  result.started = true;
  result.network_isolated = isolate;

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
  while (true) {
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
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
        kill(-pid, SIGKILL);
        killed = true;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(killed ? 5 : 10));
  }
  // Anything the child left running in its group goes with it.
  kill(-pid, SIGKILL);
  result.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status) && !killed) result.signal = WTERMSIG(status);
  return result;
}

}  // namespace cuda_agent
