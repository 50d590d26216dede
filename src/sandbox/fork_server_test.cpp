#include "sandbox/fork_server.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <map>
#include <string>
#include <thread>

#include "sandbox/process_runner.h"
#include "util/files.h"

namespace cuda_agent {
namespace {

const std::filesystem::path kServer =
    std::filesystem::path(CUDA_AGENT_SOURCE_DIR) / "harness" / "fork_server.py";

class ForkServerTest : public ::testing::Test {
 protected:
  /// python3 -E -s SCRIPT (written from source), to be forked from server.
  ProcessSpec script(const std::string& source, const std::filesystem::path& server = kServer) {
    std::filesystem::path path = dir_.path() / ("script" + std::to_string(++scripts_) + ".py");
    EXPECT_TRUE(write_file_atomic(path, source).ok());
    ProcessSpec spec;
    spec.argv = {"python3", "-E", "-s", path.string()};
    spec.fork_server = {"python3", "-E", "-s", server.string()};
    spec.cwd = dir_.path();
    spec.stdout_path = dir_.path() / "out";
    spec.stderr_path = dir_.path() / "err";
    spec.timeout_s = 120;  // the server's first answer waits for its import of torch
    return spec;
  }
  std::string out() {
    std::string text;
    EXPECT_TRUE(read_file(dir_.path() / "out", &text).ok());
    return text;
  }
  std::string err() {
    std::string text;
    EXPECT_TRUE(read_file(dir_.path() / "err", &text).ok());
    return text;
  }
  TempDir dir_;
  PosixProcessRunner runner_;
  int scripts_ = 0;
};

TEST_F(ForkServerTest, ATrustedScriptStartsWithTorchImportedAndEndsAsItsOwnProcessWould) {
  const std::string ours = std::to_string(getpid());
  ProcessSpec spec = script(
      "import os, sys\n"
      "print('torch' in sys.modules, os.getppid() != " +
      ours +
      ", os.getpid() == os.getpgid(0))\n"
      "print(os.getcwd(), os.environ.get('PROBE'), sys.argv[1:], __name__)\n"
      "sys.exit(3)\n");
  spec.argv.insert(spec.argv.end(), {"a", "b c"});
  spec.env["PROBE"] = "probe-value";
  ProcessResult r = runner_.run(spec);
  ASSERT_TRUE(r.started) << r.error;
  EXPECT_EQ(r.exit_code, 3) << err();
  EXPECT_EQ(out(), "True True True\n" + std::filesystem::canonical(dir_.path()).string() +
                       " probe-value ['a', 'b c'] __main__\n");

  // An exception: its traceback on stderr, status 1. A signal: reported as one.
  r = runner_.run(script("raise ValueError('no such thing')\n"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(err().find("ValueError: no such thing"), std::string::npos) << err();
  r = runner_.run(script("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n"));
  EXPECT_EQ(r.signal, SIGSEGV);
  EXPECT_NE(r.describe().find("signal 11"), std::string::npos);
}

TEST_F(ForkServerTest, AForkedScriptsGroupIsKilledAtItsDeadlineAndOnCancel) {
  ASSERT_TRUE(runner_.run(script("pass\n")).succeeded()) << err();  // the server is up
  const std::string sleeper =
      "import subprocess, time\n"
      "subprocess.Popen(['sleep', '30'])\n"
      "print('started', flush=True)\n"
      "time.sleep(30)\n";
  ProcessSpec spec = script(sleeper);
  spec.timeout_s = 1.0;
  ProcessResult r = runner_.run(spec);
  EXPECT_TRUE(r.timed_out);
  EXPECT_LT(r.wall_s, 10.0);
  EXPECT_EQ(out(), "started\n");
  EXPECT_NE(r.describe().find("timed out"), std::string::npos);

  spec = script(sleeper);
  spec.cancel = std::make_shared<std::atomic<bool>>(false);
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(800));
    spec.cancel->store(true);
  });
  r = runner_.run(spec);
  canceller.join();
  EXPECT_TRUE(r.cancelled);
  EXPECT_LT(r.wall_s, 10.0);
}

TEST_F(ForkServerTest, WithoutAServerTheScriptIsForkedAndExecedAsBefore) {
  const std::string ours = std::to_string(getpid());
  const std::string source = "import os, sys\nprint(os.getppid() == " + ours + ")\nsys.exit(4)\n";
  // A server that cannot start (its script is missing), tried once.
  ProcessResult r = runner_.run(script(source, dir_.path() / "missing.py"));
  EXPECT_EQ(r.exit_code, 4) << err();
  EXPECT_EQ(out(), "True\n");
  // Another interpreter than the server's.
  ProcessSpec spec = script(source);
  spec.argv[0] = "python3.11";
  if (system("command -v python3.11 > /dev/null") == 0) {
    r = runner_.run(spec);
    EXPECT_EQ(r.exit_code, 4) << err();
    EXPECT_EQ(out(), "True\n");
  }
  // Turned off in the environment.
  setenv("CUDA_AGENT_FORK_SERVER", "0", 1);
  r = runner_.run(script(source));
  unsetenv("CUDA_AGENT_FORK_SERVER");
  EXPECT_EQ(r.exit_code, 4) << err();
  EXPECT_EQ(out(), "True\n");
}

TEST_F(ForkServerTest, AScriptThatExecsItsOwnCommandLineRunsAgain) {
  // /proc/self/cmdline is the server's: execed again, it runs the script, as after fork and exec.
  ProcessSpec spec = script(
      "import os, sys\n"
      "if os.environ.get('AGAIN'):\n"
      "    print('again', sys.argv[1:], os.path.basename(sys.orig_argv[-2]))\n"
      "    sys.exit(5)\n"
      "os.environ['AGAIN'] = '1'\n"
      "with open('/proc/self/cmdline', 'rb') as f:\n"
      "    args = f.read().split(b'\\0')[:-1]\n"
      "os.execv('/proc/self/exe', args)\n");
  spec.argv.push_back("x");
  ProcessResult r = runner_.run(spec);
  EXPECT_EQ(r.exit_code, 5) << err();
  EXPECT_EQ(out(), "again ['x'] " + std::filesystem::path(spec.argv[3]).filename().string() + "\n");
}

TEST_F(ForkServerTest, TheCandidatesServerIsForkedFromTheTrustedOneWhichImportedTorchOnce) {
  // Each prints its server's pid and that server's parent.
  const std::string source =
      "import os\n"
      "with open(f'/proc/{os.getppid()}/stat') as f:\n"
      "    print(os.getppid(), f.read().rsplit(')', 1)[1].split()[1])\n";
  ProcessSpec candidate = script(source);
  candidate.env["ROLE"] = "pair";  // servers of this test's own
  candidate.fork_server.push_back(kCandidatesFlag);
  ASSERT_TRUE(runner_.run(candidate).succeeded()) << err();  // asked first: both start
  const std::string candidates = out();
  ProcessSpec trusted = script(source);
  trusted.env["ROLE"] = "pair";
  ASSERT_TRUE(runner_.run(trusted).succeeded()) << err();
  const std::string trusted_server = out().substr(0, out().find(' '));
  EXPECT_EQ(candidates.substr(candidates.find(' ') + 1), trusted_server + "\n");
  EXPECT_NE(candidates.substr(0, candidates.find(' ')), trusted_server);
}

TEST_F(ForkServerTest, CallsThatDifferOnlyInVariablesReadAfterTheImportsShareAServer) {
  // Each prints its server's pid (its parent's) and the variables it sees.
  const std::string source =
      "import os\nprint(os.getppid(), os.environ.get('LATE'), os.environ.get('EARLY'))\n";
  auto server_and_variables = [&](const std::map<std::string, std::string>& env,
                                  bool late) -> std::pair<std::string, std::string> {
    ProcessSpec spec = script(source, kServer);
    spec.fork_server.push_back("--candidates");
    spec.env = env;
    if (late) spec.env_after_imports = {"LATE"};
    ProcessResult r = runner_.run(spec);
    EXPECT_TRUE(r.succeeded()) << r.describe() << ": " << err();
    const std::string line = out();
    return {line.substr(0, line.find(' ')), line.substr(line.find(' ') + 1)};
  };
  auto [one, seen_one] = server_and_variables({{"LATE", "one"}}, true);
  auto [two, seen_two] = server_and_variables({{"LATE", "two"}}, true);
  EXPECT_EQ(seen_one, "one None\n");
  EXPECT_EQ(seen_two, "two None\n");
  EXPECT_EQ(one, two);
  // A variable the server would read while it imports, or LATE where the call does not say that
  // its script reads it only later: another server.
  auto [early, seen_early] = server_and_variables({{"LATE", "one"}, {"EARLY", "x"}}, true);
  EXPECT_EQ(seen_early, "one x\n");
  EXPECT_NE(early, one);
  auto [whole, seen_whole] = server_and_variables({{"LATE", "one"}}, false);
  EXPECT_EQ(seen_whole, "one None\n");
  EXPECT_NE(whole, one);
  // The trusted scripts' server is never the candidates'.
  ProcessSpec trusted = script(source);
  trusted.env = {{"LATE", "one"}};
  trusted.env_after_imports = {"LATE"};
  ASSERT_TRUE(runner_.run(trusted).succeeded()) << err();
  EXPECT_NE(out().substr(0, out().find(' ')), one);
}

}  // namespace
}  // namespace cuda_agent
