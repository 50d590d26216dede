#include "sandbox/readonly_mounts.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

namespace cuda_agent {
namespace {

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

/// Maps our own uid and gid to themselves in the user namespace we have just entered. Allowed to
/// its owner without any capability outside, one id each, once setgroups is denied.
bool map_own_ids(const ReadonlyPlan& plan) {
  return write_proc_file("/proc/self/setgroups", "deny") &&
         write_proc_file("/proc/self/uid_map", plan.uid_map) &&
         write_proc_file("/proc/self/gid_map", plan.gid_map);
}

/// Remounts the mount at target read-only (or writable). The remount has to repeat the flags the
/// mount has (nosuid, nodev, noexec, atime): the kernel refuses to clear one that is locked, as it
/// is for mounts inherited from a container's runtime or a more privileged user namespace. statfs,
/// not glibc's statvfs, which may read /proc/mounts.
bool remount(const char* target, bool readonly) {
  struct statfs status {};
  if (statfs(target, &status) != 0) return false;
  static constexpr std::pair<unsigned long, unsigned long> kKept[] = {
      {ST_NOSUID, MS_NOSUID},   {ST_NODEV, MS_NODEV},           {ST_NOEXEC, MS_NOEXEC},
      {ST_NOATIME, MS_NOATIME}, {ST_NODIRATIME, MS_NODIRATIME}, {ST_RELATIME, MS_RELATIME}};
  unsigned long flags = MS_BIND | MS_REMOUNT | (readonly ? MS_RDONLY : 0);
  for (auto [kept_if, kept] : kKept) {
    if (static_cast<unsigned long>(status.f_flags) & kept_if) flags |= kept;
  }
  return mount(nullptr, target, nullptr, flags, nullptr) == 0;
}

std::string joined(const std::vector<std::string>& paths) {
  std::string text;
  for (const std::string& path : paths) text += (text.empty() ? "" : ", ") + path;
  return text;
}

/// Whether path lies strictly beneath dir (both canonical).
bool beneath(const std::string& path, const std::string& dir) {
  std::string prefix = dir == "/" ? dir : dir + "/";
  return path.size() > prefix.size() && path.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

bool plan_readonly(const std::vector<std::filesystem::path>& requested, ReadonlyPlan* plan,
                   std::string* err, const std::vector<std::filesystem::path>& writable) {
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
    for (const std::string& point : points) {
      if (beneath(point, path) && std::find(mounts.begin(), mounts.end(), point) == mounts.end())
        mounts.push_back(point);
    }
    plan->mounts.push_back(std::move(mounts));
  }
  for (const auto& path : writable) {
    std::error_code ec;
    std::string canonical = std::filesystem::canonical(path, ec).string();
    if (ec) continue;  // nothing there to write into
    bool under_readonly = std::any_of(plan->paths.begin(), plan->paths.end(),
                                      [&](const std::string& p) { return beneath(canonical, p); });
    bool itself_readonly =
        std::find(plan->paths.begin(), plan->paths.end(), canonical) != plan->paths.end();
    if (under_readonly && !itself_readonly) plan->writable.push_back(canonical);
  }
  plan->user_namespace = geteuid() != 0;
  plan->lock = !plan->user_namespace;
  std::string uid = std::to_string(geteuid()), gid = std::to_string(getegid());
  plan->uid_map = uid + " " + uid + " 1\n";
  plan->gid_map = gid + " " + gid + " 1\n";
  return resolved;
}

void enter_readonly_namespace(const ReadonlyPlan& plan, bool isolate_network,
                              ReadonlyReport* report) {
  using Step = ReadonlyReport::Step;
  auto fail = [report](Step step) {
    report->error = errno;
    report->failed = step;
  };
  int flags = CLONE_NEWNS | (plan.user_namespace ? CLONE_NEWUSER : 0);
  // An unprivileged network namespace needs the user namespace, so both come from one call; a
  // kernel that refuses network namespaces still gets the read-only paths. As root, the network
  // namespace comes before step 3, so that the user namespace outside owns it.
  if (isolate_network && unshare(flags | CLONE_NEWNET) == 0) {
    report->network_isolated = true;
  } else if (unshare(flags) != 0) {
    return fail(Step::kNamespaces);
  }
  if (plan.user_namespace && !map_own_ids(plan)) return fail(Step::kNamespaces);
  // Private, so that the bind mounts below do not propagate back to the parent's namespace.
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return fail(Step::kNamespaces);
  for (std::size_t i = 0; i < plan.paths.size(); ++i) {
    const char* path = plan.paths[i].c_str();
    bool done = mount(path, path, nullptr, MS_BIND | MS_REC, nullptr) == 0;
    for (std::size_t m = 0; done && m < plan.mounts[i].size(); ++m) {
      done = remount(plan.mounts[i][m].c_str(), true);
    }
    if (!done) {
      fail(Step::kMount);
      report->failed_path = static_cast<int>(i);
      return;
    }
  }
  // The carve-outs: a bind copies the read-only flag of the mount it is made from, and of every
  // mount beneath it, so only the new top mount is made writable again.
  for (std::size_t i = 0; i < plan.writable.size(); ++i) {
    const char* path = plan.writable[i].c_str();
    if (mount(path, path, nullptr, MS_BIND | MS_REC, nullptr) != 0 || !remount(path, false)) {
      fail(Step::kWritable);
      report->failed_path = static_cast<int>(i);
      return;
    }
  }
  // Step 3: from here on the mounts above are locked, and root is root in this namespace only.
  if (plan.lock && (unshare(CLONE_NEWUSER) != 0 || !map_own_ids(plan))) fail(Step::kLock);
}

std::string describe_readonly_failure(const ReadonlyPlan& plan, const ReadonlyReport& report) {
  std::string reason = std::strerror(report.error);
  switch (report.failed) {
    case ReadonlyReport::Step::kMount:
      if (report.failed_path >= 0 && report.failed_path < static_cast<int>(plan.paths.size()))
        return "could not make " + plan.paths[report.failed_path] + " read-only: " + reason;
      break;
    case ReadonlyReport::Step::kWritable:
      if (report.failed_path >= 0 && report.failed_path < static_cast<int>(plan.writable.size()))
        return "could not keep " + plan.writable[report.failed_path] +
               " writable beneath the read-only paths: " + reason;
      break;
    case ReadonlyReport::Step::kLock:
      return "could not lock the read-only mounts of " + joined(plan.paths) + ": " + reason +
             " (entering a user namespace after making them), so root could unmount them";
    case ReadonlyReport::Step::kNamespaces:
      break;
  }
  return "could not make " + plan.paths.front() + " read-only: " + reason +
         " (creating a private mount namespace)";
}

const char* readonly_failure_suffix(const ReadonlyReport& report) {
  switch (report.failed) {
    case ReadonlyReport::Step::kMount:
      return " read-only\n";
    case ReadonlyReport::Step::kWritable:
      return " writable again beneath the read-only paths\n";
    case ReadonlyReport::Step::kLock:
      return " read-only for root (entering a user namespace to lock its mounts)\n";
    case ReadonlyReport::Step::kNamespaces:
      break;
  }
  return " read-only (creating a private mount namespace)\n";
}

bool probe_readonly_isolation() {
  std::error_code ec;
  std::filesystem::path probe = std::filesystem::temp_directory_path(ec);
  ReadonlyPlan plan;
  std::string err;
  if (ec || !plan_readonly({probe}, &plan, &err) || plan.paths.empty()) return false;
  pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    ReadonlyReport report;
    enter_readonly_namespace(plan, false, &report);
    const char* path = plan.paths[0].c_str();
    // Before exec a child of another user may still unmount it; root may not even then.
    bool holds = report.error == 0 && access(path, W_OK) != 0 && errno == EROFS &&
                 (!plan.lock || umount2(path, MNT_DETACH) != 0);
    _exit(holds ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace cuda_agent
