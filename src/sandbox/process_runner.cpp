#include "sandbox/process_runner.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

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

/// What a child needs to make ProcessSpec::readonly_paths read-only, prepared before fork so that
/// the child only makes system calls.
struct ReadonlyPlan {
  std::vector<std::string> paths;  // canonical, and existing when planned
  /// Per path: the path, then every mount point beneath it. A read-only remount changes one mount
  /// only, so each mount under a path is remounted on its own.
  std::vector<std::vector<std::string>> mounts;
  bool user_namespace = false;   // not root: a mount namespace needs a user namespace of its own
  std::string uid_map, gid_map;  // map our own ids into that user namespace
};

/// What the child did about its read-only paths, sent to the parent through a pipe before exec.
struct ChildReport {
  int error = 0;         // errno; 0: every path is read-only
  int failed_path = -1;  // index into ReadonlyPlan::paths; -1: creating the namespaces failed
  bool network_isolated = false;
};

/// Mount points from /proc/self/mountinfo (the fifth field, with its octal escapes undone).
std::vector<std::string> mount_points() {
  std::vector<std::string> points;
  std::ifstream info("/proc/self/mountinfo");
  std::string line;
  while (std::getline(info, line)) {
    std::istringstream fields(line);
    std::string id, parent, device, root, escaped;
    if (!(fields >> id >> parent >> device >> root >> escaped)) continue;
    std::string point;
    for (std::size_t i = 0; i < escaped.size(); ++i) {
      if (escaped[i] == '\\' && i + 3 < escaped.size()) {
        point += static_cast<char>(std::stoi(escaped.substr(i + 1, 3), nullptr, 8));
        i += 3;
      } else {
        point += escaped[i];
      }
    }
    points.push_back(point);
  }
  return points;
}

/// Resolves the paths that exist and finds the mounts beneath them. False, with the others
/// planned, when a path that may exist cannot be resolved (a directory on the way that we may not
/// search, say).
bool plan_readonly(const std::vector<std::filesystem::path>& requested, ReadonlyPlan* plan,
                   std::string* err) {
  bool resolved = true;
  for (const auto& path : requested) {
    std::error_code ec;
    std::filesystem::path canonical = std::filesystem::canonical(path, ec);
    if (ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory) continue;
    if (ec) {
      if (resolved) *err = "could not make " + path.string() + " read-only: " + ec.message();
      resolved = false;
      continue;
    }
    if (std::find(plan->paths.begin(), plan->paths.end(), canonical.string()) == plan->paths.end())
      plan->paths.push_back(canonical.string());
  }
  if (plan->paths.empty()) return resolved;
  std::vector<std::string> points = mount_points();
  for (const std::string& path : plan->paths) {
    std::vector<std::string> mounts = {path};
    std::string prefix = path == "/" ? path : path + "/";
    for (const std::string& point : points) {
      if (point.size() > prefix.size() && point.compare(0, prefix.size(), prefix) == 0 &&
          std::find(mounts.begin(), mounts.end(), point) == mounts.end())
        mounts.push_back(point);
    }
    plan->mounts.push_back(std::move(mounts));
  }
  plan->user_namespace = geteuid() != 0;
  std::string uid = std::to_string(geteuid()), gid = std::to_string(getegid());
  plan->uid_map = uid + " " + uid + " 1\n";
  plan->gid_map = gid + " " + gid + " 1\n";
  return resolved;
}

std::string describe_readonly_failure(const ReadonlyPlan& plan, const ChildReport& report) {
  if (report.failed_path >= 0 && report.failed_path < static_cast<int>(plan.paths.size()))
    return "could not make " + plan.paths[report.failed_path] +
           " read-only: " + std::strerror(report.error);
  return "could not make " + plan.paths.front() + " read-only: " + std::strerror(report.error) +
         " (creating a private mount namespace)";
}

// The child's side, between fork and exec: system calls only, no allocation.

bool write_proc_file(const char* path, const std::string& text) {
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool written = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  int saved = errno;
  close(fd);
  errno = saved;
  return written;
}

/// Remounts the mount at target read-only. The remount has to repeat the flags the mount has
/// (nosuid, nodev, noexec, atime): the kernel refuses to clear one that is locked, as it is for
/// mounts inherited from a container's runtime or a more privileged user namespace. statfs, not
/// glibc's statvfs, which may read /proc/mounts.
bool remount_readonly(const char* target) {
  struct statfs status {};
  if (statfs(target, &status) != 0) return false;
  static constexpr std::pair<unsigned long, unsigned long> kKept[] = {
      {ST_NOSUID, MS_NOSUID},   {ST_NODEV, MS_NODEV},           {ST_NOEXEC, MS_NOEXEC},
      {ST_NOATIME, MS_NOATIME}, {ST_NODIRATIME, MS_NODIRATIME}, {ST_RELATIME, MS_RELATIME}};
  unsigned long flags = MS_BIND | MS_REMOUNT | MS_RDONLY;
  for (auto [kept_if, kept] : kKept) {
    if (static_cast<unsigned long>(status.f_flags) & kept_if) flags |= kept;
  }
  return mount(nullptr, target, nullptr, flags, nullptr) == 0;
}

/// Moves the child into a private mount namespace (in a user namespace of its own when not root,
/// and a network namespace when asked) in which every planned path is a read-only bind mount.
void enter_readonly_namespace(const ReadonlyPlan& plan, bool isolate_network, ChildReport* report) {
  int flags = CLONE_NEWNS | (plan.user_namespace ? CLONE_NEWUSER : 0);
  // An unprivileged network namespace needs the user namespace, so both come from one call; a
  // kernel that refuses network namespaces still gets the read-only paths.
  if (isolate_network && unshare(flags | CLONE_NEWNET) == 0) {
    report->network_isolated = true;
  } else if (unshare(flags) != 0) {
    report->error = errno;
    return;
  }
  if (plan.user_namespace && (!write_proc_file("/proc/self/setgroups", "deny") ||
                              !write_proc_file("/proc/self/uid_map", plan.uid_map) ||
                              !write_proc_file("/proc/self/gid_map", plan.gid_map))) {
    report->error = errno;
    return;
  }
  // Private, so that the bind mounts below do not propagate back to the parent's namespace.
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    report->error = errno;
    return;
  }
  for (std::size_t i = 0; i < plan.paths.size(); ++i) {
    const char* path = plan.paths[i].c_str();
    bool done = mount(path, path, nullptr, MS_BIND | MS_REC, nullptr) == 0;
    for (std::size_t m = 0; done && m < plan.mounts[i].size(); ++m) {
      done = remount_readonly(plan.mounts[i][m].c_str());
    }
    if (!done) {
      report->error = errno;
      report->failed_path = static_cast<int>(i);
      return;
    }
  }
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
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGINT, &dfl, nullptr);
  sigaction(SIGTERM, &dfl, nullptr);
  if (readonly.paths.empty()) {
    if (isolate_network) unshare(CLONE_NEWNET);
  } else {
    ChildReport report;
    enter_readonly_namespace(readonly, spec.isolate_network, &report);
    if (report.error != 0 && !report.network_isolated && isolate_network)
      report.network_isolated = unshare(CLONE_NEWNET) == 0;
    write_all(report_fd, reinterpret_cast<const char*>(&report), sizeof report);
    if (report.error != 0 && spec.require_readonly) {
      const std::string& path = readonly.paths[std::max(report.failed_path, 0)];
      const char before[] = "cuda-agent sandbox: could not make ";
      const char after[] = " read-only\n";
      write_all(err_fd, before, sizeof before - 1);
      write_all(err_fd, path.data(), path.size());
      write_all(err_fd, after, sizeof after - 1);
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
  static const bool available = [] {
    std::error_code ec;
    std::filesystem::path probe = std::filesystem::temp_directory_path(ec);
    ReadonlyPlan plan;
    std::string err;
    if (ec || !plan_readonly({probe}, &plan, &err) || plan.paths.empty()) return false;
    pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
      ChildReport report;
      enter_readonly_namespace(plan, false, &report);
      bool holds = report.error == 0 && access(plan.paths[0].c_str(), W_OK) != 0 && errno == EROFS;
      _exit(holds ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }();
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

  int out_fd = open_output(spec.stdout_path);
  int err_fd = open_output(spec.stderr_path);
  if (out_fd < 0 || err_fd < 0) {
    result.error = "cannot open the output files: " + std::string(std::strerror(errno));
    if (out_fd >= 0) close(out_fd);
    if (err_fd >= 0) close(err_fd);
    return result;
  }
  bool isolate = spec.isolate_network && network_isolation_available();
  // The child says through a pipe whether its paths are read-only. The pipe is read once the
  // child is gone, so reading it never blocks.
  ReadonlyPlan readonly;
  int report_pipe[2] = {-1, -1};
  std::string plan_error;
  if (!plan_readonly(spec.readonly_paths, &readonly, &plan_error)) {
    result.readonly_enforced = false;
    result.error = plan_error;
    if (spec.require_readonly) {
      close(out_fd);
      close(err_fd);
      return result;
    }
  }
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
  if (report_pipe[0] >= 0) {
    // No report: the child was killed before it got that far, and so never ran the command.
    ChildReport report;
    if (read(report_pipe[0], &report, sizeof report) == static_cast<ssize_t>(sizeof report)) {
      result.network_isolated = report.network_isolated;
      if (report.error != 0) {
        result.readonly_enforced = false;
        result.error = describe_readonly_failure(readonly, report);
        if (spec.require_readonly) result.started = false;
      }
    }
    close(report_pipe[0]);
  }
  return result;
}

}  // namespace cuda_agent
