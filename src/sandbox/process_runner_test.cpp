#include "sandbox/process_runner.h"

#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
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

}  // namespace
}  // namespace cuda_agent
