#include "task/suite_check.h"

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "util/files.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace cuda_agent {
namespace {

std::string arg(const ProcessSpec& spec, const std::string& name) {
  for (std::size_t i = 0; i + 1 < spec.argv.size(); ++i) {
    if (spec.argv[i] == name) return spec.argv[i + 1];
  }
  return "";
}

/// Plays task_check.py: a task whose file name says "crash" kills the process, one that says
/// "hang" never finishes, and every other one gets a healthy record.
class FakeChecker : public ProcessRunner {
 public:
  ProcessResult run(const ProcessSpec& spec) override {
    runs++;
    ProcessResult result;
    result.started = true;
    std::string text;
    EXPECT_TRUE(read_file(arg(spec, "--tasks"), &text).ok());
    json tasks = json::parse(text);
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      write_file_atomic(arg(spec, "--progress"), std::to_string(i));
      std::string path = tasks[i]["path"];
      if (path.find("crash") != std::string::npos) {
        result.signal = 11;
        return result;
      }
      if (path.find("hang") != std::string::npos) {
        while (!spec.cancel->load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        result.cancelled = true;
        result.signal = 9;
        return result;
      }
      measured++;
      json record = {{"key", tasks[i]["key"]}, {"path", path},          {"ok", true},
                     {"deterministic", true},  {"matches_zero", false}, {"compile_matches", true},
                     {"eager_ms", 1.0},        {"device_name", "fake"}};
      std::ofstream(arg(spec, "--results"), std::ios::app) << record.dump() << "\n";
    }
    result.exit_code = 0;
    return result;
  }
  std::atomic<int> runs{0};
  std::atomic<int> measured{0};
};

const char* kTask =
    "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
    "def get_inputs():\n    return [torch.randn(4)]\ndef get_init_inputs():\n    return []\n";

Suite make_suite(const fs::path& dir, const std::vector<std::string>& names) {
  fs::create_directories(dir);
  for (const auto& name : names) {
    EXPECT_TRUE(write_file_atomic(dir / (name + ".py"), std::string(kTask) + "# " + name).ok());
  }
  Suite suite;
  EXPECT_TRUE(load_suite(dir, &suite).ok());
  return suite;
}

SuiteCheckOptions options_in(const fs::path& work) {
  SuiteCheckOptions o;
  o.work_dir = work;
  o.harness_dir = "/nonexistent";
  o.task_timeout_s = 0.3;
  return o;
}

std::map<std::string, std::string> first_reasons(const SuiteCheckReport& report) {
  std::map<std::string, std::string> reasons;
  for (const auto& v : report.verdicts) {
    reasons[v.task.id] = v.reasons.empty() ? "kept" : v.reasons[0].name;
  }
  return reasons;
}

TEST(SuiteCheck, ACrashDropsThatTaskAndTheRestAreStillChecked) {
  TempDir dir;
  Suite suite = make_suite(dir.path() / "s", {"a", "b_crash", "c", "d"});
  FakeChecker runner;
  SuiteCheckReport report;
  ASSERT_TRUE(check_suite(suite, options_in(dir.path() / "work"), &runner, &report).ok());
  auto reasons = first_reasons(report);
  EXPECT_EQ(reasons["a"], "kept");
  EXPECT_EQ(reasons["b_crash"], "crashed");
  EXPECT_EQ(reasons["c"], "kept");
  EXPECT_EQ(reasons["d"], "kept");
  EXPECT_EQ(runner.runs, 2);  // restarted once, after the crash
  EXPECT_EQ(report.kept(), 3);
  EXPECT_EQ(report.device_name, "fake");
}

TEST(SuiteCheck, AHangingTaskIsEndedAtTheLimit) {
  TempDir dir;
  Suite suite = make_suite(dir.path() / "s", {"a", "b_hang", "c"});
  FakeChecker runner;
  SuiteCheckReport report;
  ASSERT_TRUE(check_suite(suite, options_in(dir.path() / "work"), &runner, &report).ok());
  auto reasons = first_reasons(report);
  EXPECT_EQ(reasons["b_hang"], "timed_out");
  EXPECT_EQ(reasons["c"], "kept");
}

TEST(SuiteCheck, ASecondCheckReusesWhatTheFirstMeasured) {
  TempDir dir;
  Suite suite = make_suite(dir.path() / "s", {"a", "b", "c_crash"});
  FakeChecker first;
  SuiteCheckReport report;
  ASSERT_TRUE(check_suite(suite, options_in(dir.path() / "work"), &first, &report).ok());
  FakeChecker second;
  SuiteCheckReport again;
  ASSERT_TRUE(check_suite(suite, options_in(dir.path() / "work"), &second, &again).ok());
  EXPECT_EQ(second.runs, 0);
  EXPECT_EQ(first_reasons(report), first_reasons(again));

  // A changed task, or other settings, are measured again.
  ASSERT_TRUE(write_file_atomic(dir.path() / "s" / "a.py", std::string(kTask) + "# edited").ok());
  FakeChecker third;
  ASSERT_TRUE(check_suite(suite, options_in(dir.path() / "work"), &third, &again).ok());
  EXPECT_EQ(third.measured, 1);
  SuiteCheckOptions shrunk = options_in(dir.path() / "work");
  shrunk.shrink = 4;
  FakeChecker fourth;
  ASSERT_TRUE(check_suite(suite, shrunk, &fourth, &again).ok());
  EXPECT_EQ(fourth.measured, 2);
}

TEST(SuiteCheck, JobsSplitTheTasksAndEveryVerdictIsAnnounced) {
  TempDir dir;
  Suite suite = make_suite(dir.path() / "s", {"a", "b", "c", "d", "e"});
  FakeChecker runner;
  SuiteCheckOptions o = options_in(dir.path() / "work");
  o.jobs = 3;
  std::atomic<int> announced{0};
  o.on_verdict = [&](const TaskVerdict&, int, int total) {
    EXPECT_EQ(total, 5);
    announced++;
  };
  SuiteCheckReport report;
  ASSERT_TRUE(check_suite(suite, o, &runner, &report).ok());
  EXPECT_EQ(runner.runs, 3);
  EXPECT_EQ(announced, 5);
  EXPECT_EQ(report.kept(), 5);
  json doc = report.to_json();
  EXPECT_EQ(doc["schema"], "cuda-agent.tasks-check/1");
  EXPECT_EQ(doc["kept"].size(), 5u);
}

}  // namespace
}  // namespace cuda_agent
