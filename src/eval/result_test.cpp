#include "eval/result.h"

#include <gtest/gtest.h>

namespace cuda_agent {
namespace {

TEST(EvalResult, RoundTripsThroughJson) {
  EvalResult r;
  r.id = 7;
  r.task_id = "relu";
  r.device = "cpu";
  r.outcome = Outcome::kMismatch;
  r.reason = "output 0 differs at [3, 4]";
  r.compiled = true;
  r.violations.push_back({"inputs_modified", "input 0 of set 2"});
  r.violations.push_back({"forbidden_call", "calls exec()", "model_new.py", 12});
  r.warnings.push_back({"native_thread", "starts a std::thread", "kernels/k.cpp", 3});
  r.checks.push_back({"source rules", "failed", "1 rule broken"});
  r.eager_us = 120.5;
  r.compile.status = "ok";
  r.compile.data = {{"cached", true}};
  r.reward = -1;
  r.reward_recipe = "discrete";
  nlohmann::json j = r.to_json();
  EXPECT_EQ(j["schema"], EvalResult::kSchema);
  EXPECT_EQ(j["outcome"], "mismatch");
  EXPECT_TRUE(j["candidate_us"].is_null());
  EXPECT_FALSE(j["violations"][0].contains("file"));  // only findings of a source rule have one
  EXPECT_EQ(j["violations"][1]["line"], 12);
  EXPECT_EQ(j["warnings"][0]["file"], "kernels/k.cpp");
  EvalResult back = EvalResult::from_json(j);
  EXPECT_EQ(back.to_json(), j);
}

TEST(EvalResult, SummaryShowsTimesWithTheirSpread) {
  EvalResult r;
  r.task_id = "relu";
  r.device = "cuda";
  r.eager_us = 480;
  r.compile_us = 230;
  r.candidate_us = 2030;
  r.profile.data = {{"candidate", {{"p10_us", 1900.0}, {"p90_us", 2100.5}}}};
  std::string text = format_summary(r);
  EXPECT_NE(text.find("eager 480.0 us   torch.compile 230.0 us   candidate 2.030 ms"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("candidate 1.900 ms-2.100 ms"), std::string::npos) << text;
  EXPECT_NE(text.find("eager -"), std::string::npos) << text;
}

TEST(EvalResult, SummaryNamesOutcomeReasonAndReward) {
  EvalResult r;
  r.task_id = "relu";
  r.device = "cpu";
  r.outcome = Outcome::kTimeout;
  r.reason = "the candidate timed out after 20.0 s and was killed";
  r.reward = -1;
  r.reward_recipe = "discrete";
  std::string text = format_summary(r);
  EXPECT_NE(text.find("FAIL  relu on cpu"), std::string::npos);
  EXPECT_NE(text.find("timeout: the candidate timed out"), std::string::npos);
  EXPECT_NE(text.find("reward   -1 (discrete)"), std::string::npos);
}

TEST(EvalResult, DegenerateTaskRoundTripsAndSummaryNamesFindingsWithTheirPlace) {
  EvalResult r;
  r.task_id = "tiny";
  r.device = "cpu";
  r.outcome = Outcome::kDegenerateTask;
  r.reason = "the task is degenerate";
  r.violations.push_back({"forbidden_import", "imports ctypes", "model_new.py", 2});
  r.warnings.push_back({"fallback", "try/except in forward", "model_new.py", 9});
  EXPECT_EQ(EvalResult::from_json(r.to_json()).outcome, Outcome::kDegenerateTask);
  std::string text = format_summary(r);
  EXPECT_NE(text.find("degenerate_task: the task is degenerate"), std::string::npos) << text;
  EXPECT_NE(text.find("violation forbidden_import (model_new.py:2): imports ctypes"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("warning   fallback (model_new.py:9)"), std::string::npos) << text;
}

TEST(EvalResult, ChecksListEveryCheckWithWhatItSaw) {
  EvalResult r;
  r.checks = {{"source rules", "passed", "2 file(s) read"},
              {"time above physical floor (T9)", "failed", "call 3 took 0.000 us"}};
  std::string text = format_checks(r);
  EXPECT_NE(text.find("checks (2):"), std::string::npos) << text;
  EXPECT_NE(text.find("passed   source rules"), std::string::npos) << text;
  EXPECT_NE(text.find("failed   time above physical floor (T9)"), std::string::npos) << text;
  EXPECT_NE(text.find("call 3 took 0.000 us"), std::string::npos) << text;
}

}  // namespace
}  // namespace cuda_agent
