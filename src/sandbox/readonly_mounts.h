/// Makes files and directories read-only for a child process and everything it starts
/// (ProcessSpec::readonly_paths), even when the child runs as root. The parent plans before fork;
/// the child, between fork and exec:
///   1. enters a private mount namespace (with a network namespace when asked, and inside a user
///      namespace of its own when not root, since an unprivileged mount namespace needs one);
///   2. bind-mounts each path onto itself and remounts it, and every mount beneath it, read-only;
///      then binds each writable carve-out beneath them onto itself and remounts that one mount
///      writable (the read-only mounts beneath it, copied by the bind, keep their flag);
///   3. as root, enters a user namespace of its own too, mapping uid 0 and gid 0 to themselves.
/// Step 3 is what holds against root. The mounts now belong to a more privileged user namespace,
/// so the kernel locks them: they cannot be unmounted or made writable from inside, not even from
/// a mount namespace made there. And the child holds no capabilities over the namespaces outside,
/// so /proc/<pid>/root and ptrace of processes there are refused. uid 0 is still uid 0, so it
/// still reads, writes and executes (device files included) what root owns. A child of another
/// user needs no step 3: once it execs it has no capabilities in its user namespace.
///
/// Internal to the sandbox; the process runner is the only user.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace cuda_agent {

/// What a child needs to make its paths read-only, prepared before fork so that the child only
/// makes system calls.
struct ReadonlyPlan {
  std::vector<std::string> paths;  // canonical, and existing when planned
  /// Per path: the path, then every mount point beneath it. A read-only remount changes one mount
  /// only, so each mount under a path is remounted on its own.
  std::vector<std::vector<std::string>> mounts;
  /// Canonical directories beneath one of paths that are bound writable again after the
  /// read-only mounts (ProcessSpec::writable_paths).
  std::vector<std::string> writable;
  bool user_namespace = false;   // not root: the mount namespace goes in a user namespace
  bool lock = false;             // root: a user namespace after the mounts (step 3)
  std::string uid_map, gid_map;  // either way, our own ids map to themselves
};

/// What the child did about its read-only paths, sent to the parent through a pipe before exec.
struct ReadonlyReport {
  enum class Step { kNamespaces, kMount, kWritable, kLock };
  int error = 0;                    // errno; 0: every path is read-only, and locked as root
  Step failed = Step::kNamespaces;  // which step failed, when error is set
  int failed_path = -1;  // index into ReadonlyPlan::paths (kMount) or ::writable (kWritable)
  bool network_isolated = false;
};

/// Resolves the paths that exist and finds the mounts beneath them. False, with the others
/// planned, when a path that may exist cannot be resolved (a directory on the way that we may not
/// search, say).
bool plan_readonly(const std::vector<std::filesystem::path>& requested, ReadonlyPlan* plan,
                   std::string* err, const std::vector<std::filesystem::path>& writable = {});

/// In the child, between fork and exec: system calls only, no allocation. Takes the steps above
/// and says in report how far it got; a network namespace is made in step 1 when isolate_network.
void enter_readonly_namespace(const ReadonlyPlan& plan, bool isolate_network,
                              ReadonlyReport* report);

/// Why the paths are not read-only, as a sentence for the result: "could not make /x read-only:
/// Operation not permitted", ...
std::string describe_readonly_failure(const ReadonlyPlan& plan, const ReadonlyReport& report);

/// For the child's stderr when it stops: what it was doing when it failed, with no allocation.
/// Reads after "could not make <path>" (a read-only path, or for kWritable the writable one), and
/// ends with a newline.
const char* readonly_failure_suffix(const ReadonlyReport& report);

/// Whether the steps above work here, tried in a forked child on the temporary directory.
bool probe_readonly_isolation();

}  // namespace cuda_agent
