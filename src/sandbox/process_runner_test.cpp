#include "sandbox/process_runner.h"

#include <grp.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "util/files.h"

namespace cuda_agent {
namespace {

std::string slurp(const std::filesystem::path& path) {
  std::string text;
  EXPECT_TRUE(read_file(path, &text).ok());
  return text;
}

class ProcessRunnerTest : public ::testing::Test {
 protected:
  ProcessSpec shell(const std::string& script) {
    ProcessSpec spec;
    spec.argv = {"/bin/sh", "-c", script};
    spec.stdout_path = dir_.path() / "out";
    spec.stderr_path = dir_.path() / "err";
    spec.timeout_s = 10;
    return spec;
  }
  TempDir dir_;
  PosixProcessRunner runner_;
};

TEST_F(ProcessRunnerTest, CapturesOutputAndExitStatus) {
  ProcessResult r = runner_.run(shell("echo hello; echo oops >&2; exit 3"));
  EXPECT_TRUE(r.started);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_FALSE(r.succeeded());
  EXPECT_EQ(slurp(dir_.path() / "out"), "hello\n");
  EXPECT_EQ(slurp(dir_.path() / "err"), "oops\n");
  EXPECT_EQ(r.describe(), "exited with status 3");
}

TEST_F(ProcessRunnerTest, ReportsTheSignalThatKilledTheChild) {
  ProcessResult r = runner_.run(shell("kill -SEGV $$"));
  EXPECT_EQ(r.signal, SIGSEGV);
  EXPECT_NE(r.describe().find("signal 11"), std::string::npos);
}

TEST_F(ProcessRunnerTest, KillsTheWholeGroupAtTheDeadline) {
  ProcessSpec spec = shell("sleep 30 & sleep 30; echo never");
  spec.timeout_s = 0.5;
  ProcessResult r = runner_.run(spec);
  EXPECT_TRUE(r.timed_out);
  EXPECT_LT(r.wall_s, 5.0);
  EXPECT_EQ(slurp(dir_.path() / "out"), "");
  EXPECT_NE(r.describe().find("timed out"), std::string::npos);
}

TEST_F(ProcessRunnerTest, AGatedProcessTimesOutFromItsReleaseNotItsStart) {
  ProcessSpec spec = shell("sleep 30");
  spec.timeout_s = 1.0;
  spec.wait_timeout_s = 20;
  spec.released_at_ns = std::make_shared<std::atomic<long long>>(0);
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    spec.released_at_ns->store(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
  });
  ProcessResult r = runner_.run(spec);
  releaser.join();
  EXPECT_TRUE(r.timed_out);
  EXPECT_GE(r.wall_s, 2.4);  // 1.5 s waiting, then its own 1 s
  EXPECT_LT(r.wall_s, 10.0);
  EXPECT_DOUBLE_EQ(r.limit_s, 1.0);
}

TEST_F(ProcessRunnerTest, AnUnreleasedProcessIsBoundedByItsWaitTimeout) {
  ProcessSpec spec = shell("sleep 30");
  spec.timeout_s = 60;
  spec.wait_timeout_s = 0.5;
  spec.released_at_ns = std::make_shared<std::atomic<long long>>(0);
  ProcessResult r = runner_.run(spec);
  EXPECT_TRUE(r.timed_out);
  EXPECT_LT(r.wall_s, 5.0);
  EXPECT_DOUBLE_EQ(r.limit_s, 0.5);
}

TEST_F(ProcessRunnerTest, CancellingKillsAtOnce) {
  ProcessSpec spec = shell("sleep 30");
  spec.cancel = std::make_shared<std::atomic<bool>>(false);
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    spec.cancel->store(true);
  });
  ProcessResult r = runner_.run(spec);
  canceller.join();
  EXPECT_TRUE(r.cancelled);
  EXPECT_FALSE(r.timed_out);
  EXPECT_LT(r.wall_s, 5.0);
  EXPECT_EQ(r.describe(), "cancelled");
}

TEST_F(ProcessRunnerTest, KillsAChildOverItsMemoryLimit) {
  ProcessSpec spec;
  spec.argv = {"python3", "-c", "import time\nx = bytearray(600 * 1024 * 1024)\ntime.sleep(20)"};
  spec.memory_limit_mb = 200;
  spec.timeout_s = 15;
  ProcessResult r = runner_.run(spec);
  EXPECT_TRUE(r.memory_exceeded);
  EXPECT_GE(r.peak_rss_mb, 200);
  EXPECT_LT(r.wall_s, 14.0);
}

TEST_F(ProcessRunnerTest, PassesEnvironmentAndWorkingDirectory) {
  ProcessSpec spec = shell("echo \"$CUDA_AGENT_PROBE\"; pwd");
  spec.env["CUDA_AGENT_PROBE"] = "probe-value";
  spec.cwd = dir_.path();
  ProcessResult r = runner_.run(spec);
  EXPECT_TRUE(r.succeeded());
  EXPECT_EQ(slurp(dir_.path() / "out"),
            "probe-value\n" + std::filesystem::canonical(dir_.path()).string() + "\n");
}

TEST_F(ProcessRunnerTest, ChildHasNoNetworkWhenIsolationIsAvailable) {
  if (!network_isolation_available()) GTEST_SKIP() << "this kernel refuses network namespaces";
  // In a fresh namespace only a down loopback device exists.
  ProcessResult r = runner_.run(shell("cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '"));
  EXPECT_TRUE(r.succeeded());
  EXPECT_TRUE(r.network_isolated);
  EXPECT_EQ(slurp(dir_.path() / "out"), "lo\n");
}

TEST_F(ProcessRunnerTest, MissingProgramIsReported) {
  ProcessSpec spec;
  spec.argv = {"/nonexistent/program"};
  spec.stderr_path = dir_.path() / "err";
  ProcessResult r = runner_.run(spec);
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_NE(r.describe().find("not found"), std::string::npos);
}

std::string quoted(const std::filesystem::path& path) { return "'" + path.string() + "'"; }

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

/// Runs body in a forked copy of the test process, for tests that change the process's own
/// namespaces or capabilities. Returns its exit code: 0 passed, 77 skipped, anything else failed
/// (the body prints why to stderr).
int in_forked_process(const std::function<int()>& body) {
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) _exit(body());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

class ReadonlyPathsTest : public ProcessRunnerTest {
 protected:
  void SetUp() override {
    if (!readonly_isolation_available()) GTEST_SKIP() << "no mount namespaces here";
  }
  /// The shell command, run by fork and exec or, with forked_, by a Python script that the
  /// candidates' fork server forks (the child making the read-only paths itself), in a server
  /// of this process's own: one a forked test process starts sees that process's mounts.
  ProcessSpec shell(const std::string& script) {
    ProcessSpec spec = ProcessRunnerTest::shell(script);
    if (!forked_) return spec;
    const std::filesystem::path runner = readonly_runner_.path() / "run_shell.py";
    if (!std::filesystem::exists(runner)) {
      write_text(runner,
                 "import subprocess, sys\n"
                 "sys.exit(subprocess.call(['/bin/sh', '-c', sys.argv[1]]))\n");
    }
    spec.argv = {"python3", "-E", "-s", runner.string(), script};
    spec.fork_server = {
        "python3", "-E", "-s",
        (std::filesystem::path(CUDA_AGENT_SOURCE_DIR) / "harness" / "fork_server.py").string(),
        "--candidates"};
    spec.env["CUDA_AGENT_TEST_SERVER"] = std::to_string(getpid());
    spec.timeout_s = 120;  // the server's first answer waits for its import of torch
    return spec;
  }
  ProcessSpec shell_readonly(const std::string& script, std::filesystem::path path) {
    ProcessSpec spec = shell(script);
    spec.readonly_paths = {std::move(path)};
    return spec;
  }
  TempDir readonly_;
  TempDir readonly_runner_;
  bool forked_ = false;
};

/// The tests that hold for a child of fork and exec and for one of the candidates' fork server.
class ReadonlyPathsBothWays : public ReadonlyPathsTest, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    ReadonlyPathsTest::SetUp();
    forked_ = GetParam();
  }
};

INSTANTIATE_TEST_SUITE_P(ExecOrForkServer, ReadonlyPathsBothWays, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "ForkServer" : "Exec");
                         });

TEST_P(ReadonlyPathsBothWays, ADirectoryCannotBeWrittenWhileOthersCan) {
  ProcessResult r = runner_.run(shell_readonly(
      "echo x > " + quoted(readonly_.path() / "f") + " && echo y > " + quoted(dir_.path() / "g"),
      readonly_.path()));
  EXPECT_TRUE(r.started);
  EXPECT_TRUE(r.readonly_enforced);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_FALSE(std::filesystem::exists(readonly_.path() / "f"));
  EXPECT_NE(slurp(dir_.path() / "err").find("Read-only file system"), std::string::npos);

  r = runner_.run(shell_readonly("echo y > " + quoted(dir_.path() / "g"), readonly_.path()));
  EXPECT_TRUE(r.succeeded()) << r.describe();
  EXPECT_EQ(slurp(dir_.path() / "g"), "y\n");
}

TEST_F(ReadonlyPathsTest, AFileCanBeReadButNotAppendedTo) {
  std::filesystem::path file = readonly_.path() / "data";
  write_text(file, "data\n");
  ProcessResult r =
      runner_.run(shell_readonly("cat " + quoted(file) + " && echo more >> " + quoted(file), file));
  EXPECT_TRUE(r.started);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(slurp(dir_.path() / "out"), "data\n");
  EXPECT_EQ(slurp(file), "data\n");
  // Its directory is not read-only.
  r = runner_.run(shell_readonly("echo x > " + quoted(readonly_.path() / "other"), file));
  EXPECT_TRUE(r.succeeded()) << r.describe();
}

TEST_F(ReadonlyPathsTest, SubdirectoriesAreReadOnlyToo) {
  std::filesystem::create_directories(readonly_.path() / "a" / "b");
  ProcessResult r = runner_.run(shell_readonly(
      "echo x > " + quoted(readonly_.path() / "a" / "b" / "f") + "; mkdir " +
          quoted(readonly_.path() / "a" / "c") + "; rmdir " + quoted(readonly_.path() / "a" / "b") +
          "; test -e " + quoted(readonly_.path() / "a" / "b" / "f") + " || test -e " +
          quoted(readonly_.path() / "a" / "c") + " || test ! -d " +
          quoted(readonly_.path() / "a" / "b"),
      readonly_.path()));
  EXPECT_TRUE(r.started);
  EXPECT_NE(r.exit_code, 0);  // the last test fails: nothing was written, made or removed
  EXPECT_FALSE(std::filesystem::exists(readonly_.path() / "a" / "b" / "f"));
  EXPECT_FALSE(std::filesystem::exists(readonly_.path() / "a" / "c"));
  EXPECT_TRUE(std::filesystem::is_directory(readonly_.path() / "a" / "b"));
}

TEST_P(ReadonlyPathsBothWays, AWritableFolderBeneathAReadOnlyOneStaysWritable) {
  // A run folder in the temporary directory, with the store in that directory too.
  std::filesystem::path run = readonly_.path() / "run", inner = run / "trusted";
  std::filesystem::create_directories(inner);
  ProcessSpec spec = shell("echo out > " + quoted(run / "out") + " && { echo x > " +
                           quoted(readonly_.path() / "store") + "; echo y > " +
                           quoted(inner / "inputs") + "; true; }");
  spec.readonly_paths = {readonly_.path(), inner};
  spec.writable_paths = {run, dir_.path() / "missing"};
  ProcessResult r = runner_.run(spec);
  EXPECT_TRUE(r.succeeded()) << r.describe();
  EXPECT_TRUE(r.readonly_enforced);
  EXPECT_EQ(slurp(run / "out"), "out\n");
  EXPECT_FALSE(std::filesystem::exists(readonly_.path() / "store"));
  EXPECT_FALSE(std::filesystem::exists(inner / "inputs"));  // read-only beneath the writable one
  // Nothing beneath a read-only path asked for: the writable path is left as it is.
  spec = shell("echo z > " + quoted(dir_.path() / "z"));
  spec.readonly_paths = {readonly_.path()};
  spec.writable_paths = {dir_.path()};
  r = runner_.run(spec);
  EXPECT_TRUE(r.succeeded()) << r.describe();
  EXPECT_EQ(slurp(dir_.path() / "z"), "z\n");
}

TEST_P(ReadonlyPathsBothWays, AMountBeneathAReadOnlyDirectoryIsReadOnlyToo) {
  std::filesystem::path sub = readonly_.path() / "sub";
  std::filesystem::create_directories(sub);
  int code = in_forked_process([&] {
    // A tmpfs on sub, in a mount namespace of this forked process only.
    if (unshare(CLONE_NEWNS) != 0 ||
        mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        mount("tmpfs", sub.c_str(), "tmpfs", 0, nullptr) != 0)
      return 77;
    ProcessResult writable = runner_.run(shell("echo x > " + quoted(sub / "f")));
    if (!writable.succeeded()) {
      std::fprintf(stderr, "the tmpfs is not writable: %s\n", writable.describe().c_str());
      return 1;
    }
    ProcessResult r =
        runner_.run(shell_readonly("echo y > " + quoted(sub / "g"), readonly_.path()));
    if (!r.started || r.exit_code == 0 || std::filesystem::exists(sub / "g")) {
      std::fprintf(stderr, "the tmpfs stayed writable: %s\n", r.describe().c_str());
      return 1;
    }
    return 0;
  });
  if (code == 77) GTEST_SKIP() << "cannot mount a tmpfs here";
  EXPECT_EQ(code, 0);
}

TEST_F(ReadonlyPathsTest, TheParentsViewIsUnaffected) {
  ProcessResult r =
      runner_.run(shell_readonly("echo x > " + quoted(readonly_.path() / "f"), readonly_.path()));
  EXPECT_NE(r.exit_code, 0);
  write_text(readonly_.path() / "f", "parent\n");
  EXPECT_EQ(slurp(readonly_.path() / "f"), "parent\n");
}

TEST_P(ReadonlyPathsBothWays, HoldsTogetherWithNetworkIsolation) {
  if (!network_isolation_available() && geteuid() == 0)
    GTEST_SKIP() << "this kernel refuses network namespaces";
  ProcessSpec spec = shell_readonly("echo x > " + quoted(readonly_.path() / "f") +
                                        "; written=$?; cat /proc/net/dev | tail -n +3 | cut -d: "
                                        "-f1 | tr -d ' '; exit $written",
                                    readonly_.path());
  spec.isolate_network = true;
  ProcessResult r = runner_.run(spec);
  EXPECT_TRUE(r.started);
  EXPECT_TRUE(r.readonly_enforced);
  EXPECT_TRUE(r.network_isolated);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_FALSE(std::filesystem::exists(readonly_.path() / "f"));
  EXPECT_EQ(slurp(dir_.path() / "out"), "lo\n");
}

TEST_F(ReadonlyPathsTest, AMissingPathIsIgnored) {
  ProcessSpec spec = shell("echo x > " + quoted(readonly_.path() / "missing"));
  spec.readonly_paths = {readonly_.path() / "missing", readonly_.path() / "missing" / "deeper"};
  ProcessResult r = runner_.run(spec);
  EXPECT_TRUE(r.succeeded()) << r.describe();
  EXPECT_TRUE(r.readonly_enforced);
  EXPECT_TRUE(std::filesystem::exists(readonly_.path() / "missing"));

  spec = shell("echo x > " + quoted(readonly_.path() / "f"));
  spec.readonly_paths = {dir_.path() / "missing", readonly_.path()};
  r = runner_.run(spec);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_FALSE(std::filesystem::exists(readonly_.path() / "f"));
}

TEST_F(ReadonlyPathsTest, ASymlinkIsResolvedToItsTarget) {
  std::filesystem::create_directory_symlink(readonly_.path(), dir_.path() / "link");
  ProcessResult r = runner_.run(
      shell_readonly("echo x > " + quoted(readonly_.path() / "f"), dir_.path() / "link"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_FALSE(std::filesystem::exists(readonly_.path() / "f"));
}

/// Drops CAP_SYS_ADMIN from this (forked) process, so that it may not make a mount namespace;
/// from its bounding set too, so that a program it execs as root (a fork server) has none either.
bool drop_sys_admin() {
  if (prctl(PR_CAPBSET_DROP, CAP_SYS_ADMIN, 0, 0, 0) != 0) return false;
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (syscall(SYS_capget, &header, data) != 0) return false;
  const unsigned bit = 1u << CAP_SYS_ADMIN;
  data[0].effective &= ~bit;
  data[0].permitted &= ~bit;
  data[0].inheritable &= ~bit;
  return syscall(SYS_capset, &header, data) == 0 && unshare(CLONE_NEWNS) != 0;
}

TEST_P(ReadonlyPathsBothWays, AFailureStopsTheChildOnlyWhenRequired) {
  // As root, without CAP_SYS_ADMIN, the runner cannot make a mount namespace (as another user it
  // would make a user namespace first, which needs no capability).
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to provoke the failure";
  std::filesystem::path file = readonly_.path() / "f";
  int code = in_forked_process([&] {
    if (!drop_sys_admin()) return 77;
    ProcessSpec spec = shell_readonly("echo x > " + quoted(file), readonly_.path());
    ProcessResult r = runner_.run(spec);
    std::string expected = "could not make " +
                           std::filesystem::canonical(readonly_.path()).string() +
                           " read-only: " + std::strerror(EPERM);
    if (r.started || r.readonly_enforced || r.error.find(expected) != 0 ||
        std::filesystem::exists(file) || r.describe().find(expected) == std::string::npos) {
      std::fprintf(stderr, "required: %s\n", r.describe().c_str());
      return 1;
    }
    spec.require_readonly = false;
    r = runner_.run(spec);
    if (!r.succeeded() || r.readonly_enforced || !std::filesystem::exists(file) ||
        r.describe().find("left writable (" + expected) == std::string::npos) {
      std::fprintf(stderr, "not required: %s\n", r.describe().c_str());
      return 1;
    }
    return 0;
  });
  if (code == 77) GTEST_SKIP() << "cannot drop CAP_SYS_ADMIN here";
  EXPECT_EQ(code, 0);
}

TEST_P(ReadonlyPathsBothWays, RootCannotUnmountThemOrMakeThemWritable) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  std::string dir = quoted(readonly_.path());
  ProcessResult r = runner_.run(shell_readonly(
      "umount " + dir + "; umount -l " + dir + "; mount -o remount,bind,rw " + dir +
          "; unshare -m sh -c 'umount -l " + readonly_.path().string() + "; echo x > " +
          (readonly_.path() / "g").string() + "'; echo x > " + quoted(readonly_.path() / "f"),
      readonly_.path()));
  EXPECT_TRUE(r.started);
  EXPECT_TRUE(r.readonly_enforced) << r.describe();
  EXPECT_NE(r.exit_code, 0);
  EXPECT_FALSE(std::filesystem::exists(readonly_.path() / "f"));
  EXPECT_FALSE(std::filesystem::exists(readonly_.path() / "g"));
}

TEST_P(ReadonlyPathsBothWays, CannotBeWrittenThroughTheRootOfAProcessOutside) {
  auto through = [&](const std::string& root, const std::string& name) {
    return quoted(std::filesystem::path(root + (readonly_.path() / name).string()));
  };
  std::string parent_root = "/proc/" + std::to_string(getpid()) + "/root";
  // Without read-only paths the way through the parent's root is open, so the test means something.
  ProcessResult r = runner_.run(shell("echo x > " + through(parent_root, "open")));
  EXPECT_TRUE(r.succeeded()) << r.describe();
  EXPECT_TRUE(std::filesystem::exists(readonly_.path() / "open"));

  r = runner_.run(shell_readonly("echo x > " + through("/proc/1/root", "a") + "; echo x > " +
                                     through(parent_root, "b") + "; ls " + parent_root +
                                     "/ || exit 3",
                                 readonly_.path()));
  EXPECT_TRUE(r.started);
  EXPECT_TRUE(r.readonly_enforced) << r.describe();
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_FALSE(std::filesystem::exists(readonly_.path() / "a"));
  EXPECT_FALSE(std::filesystem::exists(readonly_.path() / "b"));
}

TEST_P(ReadonlyPathsBothWays, TheChildStillRunsProgramsOpensDevicesAndWritesElsewhere) {
  // uid 0 stays uid 0, so device files open as before: /dev/null here, the GPU's where present.
  ProcessResult r = runner_.run(shell_readonly(
      "echo y > " + quoted(dir_.path() / "g") + " && echo z > /dev/null && cat /dev/null && " +
          "head -c 4 /dev/urandom | wc -c && " +
          "for d in /dev/nvidiactl /dev/nvidia0 /dev/nvidia-uvm; do " +
          "if [ -c $d ]; then exec 3<>$d || exit 9; exec 3>&-; fi; done; id -u",
      readonly_.path()));
  EXPECT_TRUE(r.succeeded()) << r.describe() << ": " << slurp(dir_.path() / "err");
  EXPECT_TRUE(r.readonly_enforced);
  EXPECT_EQ(slurp(dir_.path() / "g"), "y\n");
  EXPECT_EQ(slurp(dir_.path() / "out"), "4\n" + std::to_string(geteuid()) + "\n");
}

// Without the user namespace that root's children get after the mounts: once it execs, a child
// of another user has no capabilities in the user namespace that its mounts were made in.
TEST_F(ReadonlyPathsTest, AChildOfAnotherUserCannotUnmountThemEither) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to become another user";
  const uid_t nobody = 65534;
  std::filesystem::path file = readonly_.path() / "f";
  if (chown(readonly_.path().c_str(), nobody, nobody) != 0 ||
      chown(dir_.path().c_str(), nobody, nobody) != 0)
    GTEST_SKIP() << "cannot give the directories to another user";
  int code = in_forked_process([&] {
    if (setgroups(0, nullptr) != 0 || setresgid(nobody, nobody, nobody) != 0 ||
        setresuid(nobody, nobody, nobody) != 0)
      return 77;
    // Changing users made this process undumpable, which hides /proc/self/uid_map from it and its
    // children; a process started as another user is dumpable.
    prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
    // umount(8) refuses users other than root by itself, so the system call is made directly.
    ProcessResult r = runner_.run(shell_readonly(
        "python3 -c 'import ctypes, sys; ctypes.CDLL(None).umount2(sys.argv[1].encode(), 2)' " +
            quoted(readonly_.path()) + "; unshare -Urm sh -c 'umount -l " +
            readonly_.path().string() + "; echo x > " + file.string() + "'; echo x > " +
            quoted(file),
        readonly_.path()));
    if (!r.readonly_enforced) {  // no user namespaces for other users here
      std::fprintf(stderr, "as another user: %s\n", r.describe().c_str());
      return 77;
    }
    if (!r.started || r.exit_code == 0 || std::filesystem::exists(file)) {
      std::fprintf(stderr, "another user made it writable: %s\n", r.describe().c_str());
      return 1;
    }
    return 0;
  });
  if (code == 77) GTEST_SKIP() << "cannot run a sandboxed child as another user here";
  EXPECT_EQ(code, 0);
}

/// Makes unshare(CLONE_NEWUSER) fail with EPERM in this (forked) process and its children.
bool refuse_user_namespaces() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_unshare, 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])),  // the low half
      BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_NEWUSER, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{static_cast<unsigned short>(std::size(filter)), filter};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0 && unshare(CLONE_NEWUSER) != 0;
}

TEST_P(ReadonlyPathsBothWays, NoUserNamespaceToLockTheMountsIsAFailure) {
  // As root the mount namespace needs no user namespace; only the lock after the mounts does.
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to provoke the failure";
  std::filesystem::path file = readonly_.path() / "f";
  int code = in_forked_process([&] {
    if (!refuse_user_namespaces()) return 77;
    ProcessSpec spec = shell_readonly("echo x > " + quoted(file), readonly_.path());
    ProcessResult r = runner_.run(spec);
    std::string expected = "could not lock the read-only mounts of " +
                           std::filesystem::canonical(readonly_.path()).string() + ": " +
                           std::strerror(EPERM);
    if (r.started || r.readonly_enforced || r.error.find(expected) != 0 ||
        slurp(dir_.path() / "err").find("user namespace") == std::string::npos ||
        std::filesystem::exists(file)) {
      std::fprintf(stderr, "required: %s\n", r.describe().c_str());
      return 1;
    }
    // Not required: the command runs, its paths still read-only but not locked, and says so.
    spec.require_readonly = false;
    r = runner_.run(spec);
    if (!r.started || r.exit_code == 0 || r.readonly_enforced || std::filesystem::exists(file) ||
        r.describe().find(expected) == std::string::npos) {
      std::fprintf(stderr, "not required: %s\n", r.describe().c_str());
      return 1;
    }
    return 0;
  });
  if (code == 77) GTEST_SKIP() << "cannot refuse user namespaces here";
  EXPECT_EQ(code, 0);
}

TEST(ProcessResultTest, DescribesReadOnlyPathsOnlyWhenTheyWereNotEnforced) {
  ProcessResult r;
  r.started = true;
  r.exit_code = 0;
  EXPECT_EQ(r.describe(), "exited with status 0");
  r.readonly_enforced = false;
  r.error = "could not make /x read-only: Operation not permitted";
  EXPECT_EQ(r.describe(),
            "exited with status 0; its read-only paths were left writable (could not make /x "
            "read-only: Operation not permitted)");
}

}  // namespace
}  // namespace cuda_agent
