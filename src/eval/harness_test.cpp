#include "eval/harness.h"

#include <gtest/gtest.h>

#include <chrono>

#include "util/files.h"

namespace cuda_agent {
namespace {

namespace fs = std::filesystem;

// A stand-in harness script that speaks the protocol: waits for its gate, then reports what the
// gate said and the environment it was given.
const char* kGateScript = R"(import json, os, sys, time
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
word = None
if "--wait-for" in args:
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
