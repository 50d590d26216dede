#include "agent/shell_tools.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "util/files.h"

namespace cuda_agent::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

/// A workspace with a shell whose logs go outside it.
struct Shell {
  TempDir root;
  PosixProcessRunner runner;
  ToolContext context{WorkspacePaths(make(root.path())), {}, {}, nullptr};
  ToolRegistry tools;

  Shell() {
    fs::create_directories(root.path() / "logs");
    context.shells = std::make_shared<ShellSessions>(&runner, root.path() / "logs");
    add_shell_tools(&tools);
  }
  static fs::path make(const fs::path& root) {
    fs::create_directories(root / "ws");
    return root / "ws";
  }
  ToolOutput run(const std::string& tool, const json& args) {
    return tools.find(tool)->run(args, context);
  }
};

TEST(ShellTools, BashRunsInTheWorkspaceWithStderrAndExitStatus) {
  Shell s;
  ToolOutput out = s.run("Bash", {{"command", "pwd; echo oops >&2; exit 3"}});
  EXPECT_TRUE(out.error);
  EXPECT_NE(out.text.find(s.context.paths.root().string()), std::string::npos);
  EXPECT_NE(out.text.find("oops"), std::string::npos);
  EXPECT_NE(out.text.find("[exit status 3]"), std::string::npos);
  out = s.run("Bash", {{"command", "true"}});
  EXPECT_FALSE(out.error);
  EXPECT_EQ(out.text, "(no output)");
}

TEST(ShellTools, BashTimesOutAndKillsTheCommand) {
  Shell s;
  auto start = std::chrono::steady_clock::now();
  ToolOutput out = s.run("Bash", {{"command", "echo before; sleep 30"}, {"timeout", 500}});
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(took, 10);
  EXPECT_TRUE(out.error);
  EXPECT_NE(out.text.find("before"), std::string::npos);
  EXPECT_NE(out.text.find("timed out"), std::string::npos);
}

TEST(ShellTools, LongOutputIsCutInTheMiddleWithANote) {
  Shell s;
  ToolOutput out = s.run("Bash", {{"command", "seq 1 100000"}});
  EXPECT_FALSE(out.error);
  EXPECT_LT(out.text.size(), 31000u);
  EXPECT_EQ(out.text.rfind("1\n2\n", 0), 0u);
  EXPECT_NE(out.text.find("\n100000\n"), std::string::npos);
  EXPECT_NE(out.text.find("characters left out"), std::string::npos);
}

TEST(ShellTools, BadArgumentsAreErrorsTheModelCanRead) {
  Shell s;
  EXPECT_NE(s.run("Bash", json::object()).text.find("missing required argument \"command\""),
            std::string::npos);
  EXPECT_TRUE(s.run("Bash", {{"command", "  "}}).error);
  EXPECT_TRUE(s.run("Bash", {{"command", "ls"}, {"timeout", -5}}).error);
  EXPECT_TRUE(s.run("Bash", {{"command", "ls"}, {"timeout", "soon"}}).error);
  // Quoted numbers and booleans, as models that write calls as text send them.
  EXPECT_FALSE(s.run("Bash", {{"command", "true"}, {"timeout", "5000"}}).error);
  EXPECT_TRUE(s.run("BashOutput", {{"bash_id", "bash_9"}}).error);
  EXPECT_TRUE(s.run("KillBash", {{"shell_id", "bash_9"}}).error);
}

TEST(ShellTools, BackgroundShellIsReadIncrementallyAndKilled) {
  Shell s;
  ToolOutput started = s.run("Bash", {{"command", "echo first; sleep 0.5; echo second; sleep 60"},
                                      {"run_in_background", true}});
  ASSERT_FALSE(started.error) << started.text;
  EXPECT_NE(started.text.find("bash_1"), std::string::npos);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  ToolOutput first = s.run("BashOutput", {{"bash_id", "bash_1"}});
  EXPECT_NE(first.text.find("running"), std::string::npos);
  EXPECT_NE(first.text.find("first"), std::string::npos);
  EXPECT_NE(first.text.find("second"), std::string::npos);
  // Only what is new since the last read.
  ToolOutput again = s.run("BashOutput", {{"bash_id", "bash_1"}});
  EXPECT_EQ(again.text.find("first"), std::string::npos);
  EXPECT_NE(again.text.find("no new output"), std::string::npos);
  ToolOutput killed = s.run("KillBash", {{"shell_id", "bash_1"}});
  EXPECT_FALSE(killed.error);
  EXPECT_EQ(s.context.shells->running(), 0u);
  EXPECT_NE(s.run("BashOutput", {{"bash_id", "bash_1"}}).text.find("killed"), std::string::npos);
}

TEST(ShellTools, BackgroundOutputCanBeFiltered) {
  Shell s;
  s.run("Bash", {{"command", "printf 'ok 1\\nerror: x\\nok 2\\n'"}, {"run_in_background", true}});
  for (int i = 0; i < 100 && s.context.shells->running() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ToolOutput out = s.run("BashOutput", {{"bash_id", "bash_1"}, {"filter", "^error"}});
  EXPECT_NE(out.text.find("error: x"), std::string::npos);
  EXPECT_EQ(out.text.find("ok 1"), std::string::npos);
  EXPECT_NE(out.text.find("exited with status 0"), std::string::npos);
  EXPECT_TRUE(s.run("BashOutput", {{"bash_id", "bash_1"}, {"filter", "("}}).error);
}

TEST(ShellTools, ShellsStillRunningEndWithTheEpisode) {
  TempDir marker_dir;
  const fs::path marker = marker_dir.path() / "late";
  {
    Shell s;
    s.run("Bash", {{"command", "sleep 2; touch " + marker.string()}, {"run_in_background", true}});
  }  // the sessions go away: the shell is killed
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_FALSE(fs::exists(marker));
}

TEST(ShellTools, ReadOnlyPathsCannotBeWrittenByCommands) {
  if (!readonly_isolation_available()) GTEST_SKIP() << "no mount namespaces here";
  Shell s;
  write_file_atomic(s.context.paths.root() / "model.py", "x = 1\n");
  s.context.readonly_paths = {s.context.paths.root() / "model.py"};
  ToolOutput out = s.run("Bash", {{"command", "echo y > model.py"}});
  EXPECT_TRUE(out.error);
  std::string text;
  read_file(s.context.paths.root() / "model.py", &text);
  EXPECT_EQ(text, "x = 1\n");
  EXPECT_FALSE(s.run("Bash", {{"command", "echo y > model_new.py"}}).error);
}

}  // namespace
}  // namespace cuda_agent::agent
