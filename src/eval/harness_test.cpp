#include "eval/harness.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "util/files.h"

namespace cuda_agent {
namespace {

namespace fs = std::filesystem;

// A stand-in harness script that speaks the protocol: starts up (for $STARTUP_S seconds; it
// exits there when $EXIT_EARLY is set), announces it is at its gate, waits for it, then reports
// what the gate said and the environment it was given.
const char* kGateScript = R"(import json, os, sys, time
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
time.sleep(float(os.environ.get("STARTUP_S", "0")))
if os.environ.get("EXIT_EARLY"):
    sys.exit(3)
word = None
if "--wait-for" in args:
    open(args["--wait-for"] + ".waiting", "w").write("waiting")
    while not os.path.exists(args["--wait-for"]):
        time.sleep(0.005)
    word = open(args["--wait-for"]).read()
with open(args["--report"], "w") as f:
    json.dump({"ok": True, "gate": word, "probe": os.environ.get("PROBE"), "cwd": os.getcwd()}, f)
)";

class HarnessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(write_file_atomic(dir_.path() / "gate.py", kGateScript).ok());
    options_.harness_dir = dir_.path();
    options_.wait_timeout_s = 30;
  }
  TempDir dir_;
  TempDir run_dir_;
  HarnessOptions options_;
  PosixProcessRunner runner_;
};

TEST_F(HarnessTest, AGatedStepRunsWhenReleasedAndReportsBack) {
  Harness harness(options_, &runner_, run_dir_.path());
  HarnessStep step(&harness, harness.call("gate.py", {}, 30, dir_.path(), {{"PROBE", "x"}}, true));
  HarnessResult result = step.go();
  EXPECT_TRUE(result.process.succeeded()) << result.output;
  EXPECT_EQ(result.report["gate"], "go");
  EXPECT_EQ(result.report["probe"], "x");
  EXPECT_EQ(result.report["cwd"], fs::canonical(dir_.path()).string());
}

TEST_F(HarnessTest, AStepIsStartingUntilItReachesItsGateOrEnds) {
  Harness harness(options_, &runner_, run_dir_.path());
  auto start = std::chrono::steady_clock::now();
  HarnessStep slow(&harness,
                   harness.call("gate.py", {}, 30, dir_.path(), {{"STARTUP_S", "0.5"}}, true));
  HarnessStep gone(&harness, harness.call("gate.py", {}, 30, dir_.path(),
                                          {{"STARTUP_S", "0.3"}, {"EXIT_EARLY", "1"}}, true));
  EXPECT_TRUE(slow.starting());
  EXPECT_TRUE(gone.starting());
  while (slow.starting() || gone.starting())
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(seconds, 0.45);
  EXPECT_TRUE(fs::exists(slow.call().gate.string() + ".waiting"));
  EXPECT_FALSE(fs::exists(gone.call().gate.string() + ".waiting"));
  EXPECT_EQ(slow.go().report["gate"], "go");
  EXPECT_FALSE(slow.starting());  // released
}

TEST_F(HarnessTest, PythonKeepsItsBytecodeWhereTheOptionsSay) {
  Harness fresh(options_, &runner_, run_dir_.path());
  HarnessOptions kept = options_;
  kept.bytecode_dir = dir_.path() / "bytecode";
  Harness shared(kept, &runner_, run_dir_.path());
  auto prefix = [](const HarnessCall& call) {
    for (const std::string& arg : call.spec.argv)
      if (arg.rfind("pycache_prefix=", 0) == 0) return arg.substr(15);
    return std::string();
  };
  EXPECT_EQ(prefix(fresh.call("gate.py", {}, 30, dir_.path(), {}, false)),
            (run_dir_.path() / "trusted" / "pycache").string());
  EXPECT_EQ(prefix(shared.call("gate.py", {}, 30, dir_.path(), {}, false)),
            (dir_.path() / "bytecode").string());
}

TEST_F(HarnessTest, AnUngatedStepRunsAtOnce) {
  Harness harness(options_, &runner_, run_dir_.path());
  HarnessStep step(&harness, harness.call("gate.py", {}, 30, dir_.path(), {}, false));
  HarnessResult result = step.go();
  EXPECT_TRUE(step.call().gate.empty());
  ASSERT_TRUE(result.report.is_object()) << result.output;
  EXPECT_TRUE(result.report["gate"].is_null());
}

TEST_F(HarnessTest, AStepThatIsNeverReleasedIsCancelledWhenItGoesAway) {
  Harness harness(options_, &runner_, run_dir_.path());
  auto start = std::chrono::steady_clock::now();
  { HarnessStep step(&harness, harness.call("gate.py", {}, 30, dir_.path(), {}, true)); }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 10.0);  // far under the 30 s wait timeout
}

TEST_F(HarnessTest, AMissingReportIsNull) {
  ASSERT_TRUE(write_file_atomic(dir_.path() / "silent.py", "import sys\nsys.exit(3)\n").ok());
  Harness harness(options_, &runner_, run_dir_.path());
  HarnessStep step(&harness, harness.call("silent.py", {}, 30, dir_.path(), {}, false));
  HarnessResult result = step.go();
  EXPECT_EQ(result.process.exit_code, 3);
  EXPECT_TRUE(result.report.is_null());
}

TEST(ReportField, WrongTypesAndMissingKeysFallBackToTheDefault) {
  nlohmann::json report = {{"ok", "yes"}, {"median_us", "fast"}, {"sets", 5}, {"error", 7}};
  EXPECT_FALSE(report_field(report, "ok", false));
  EXPECT_EQ(report_field(report, "median_us", 0.0), 0.0);
  EXPECT_EQ(report_field(report, "sets", 0), 5);
  EXPECT_EQ(report_field(report, "error", "none"), "none");
  EXPECT_EQ(report_field(nlohmann::json("not an object"), "ok", true), true);
  EXPECT_EQ(report_field(report, "violations", nlohmann::json::array()), nlohmann::json::array());
}

}  // namespace
}  // namespace cuda_agent
