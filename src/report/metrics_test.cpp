#include "report/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <regex>

namespace cuda_agent::report {
namespace {

TaskResult timed(const std::string& task, double vs_eager, double vs_compile, int reward) {
  TaskResult r;
  r.task = task;
  r.level = task.substr(0, task.find('/'));
  r.outcome = "pass";
  r.correct = true;
  r.reward = reward;
  r.eager_us = 100;
  r.compile_us = 100 * vs_compile / vs_eager;
  r.candidate_us = 100 / vs_eager;
  r.speedup_vs_eager = vs_eager;
  r.speedup_vs_compile = vs_compile;
  r.evaluations = 2;
  return r;
}

TaskResult failed(const std::string& task, const std::string& outcome) {
  TaskResult r;
  r.task = task;
  r.level = task.substr(0, task.find('/'));
  r.outcome = outcome;
  if (outcome != "error") r.reward = -1;
  r.evaluations = outcome == "error" ? 0 : 1;
  return r;
}

std::vector<TaskResult> sample() {
  return {timed("level1/a", 2.0, 1.5, 3), timed("level1/b", 0.5, 0.4, 1),
          failed("level1/c", "mismatch"), timed("level2/a", 4.0, 0.9, 2),
          failed("level2/b", "error")};
}

TEST(Metrics, PerLevelAndOverallInThePapersTerms) {
  const std::vector<Metrics> m = compute_metrics(sample());
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0].level, "level1");
  EXPECT_EQ(m[1].level, "level2");
  EXPECT_EQ(m[2].level, "all");
  EXPECT_EQ(m[0].tasks, 3);
  EXPECT_EQ(m[0].correct, 2);
  EXPECT_EQ(m[0].faster_than_eager, 1);
  EXPECT_EQ(m[0].faster_than_compile, 1);
  EXPECT_NEAR(*m[0].geomean_vs_eager, 1.0, 1e-9);  // sqrt(2 * 0.5)
  EXPECT_NEAR(*m[0].geomean_vs_compile, std::sqrt(1.5 * 0.4), 1e-9);
  const Metrics& all = m[2];
  EXPECT_EQ(all.tasks, 5);
  EXPECT_EQ(all.correct, 3);
  EXPECT_DOUBLE_EQ(all.share(all.correct), 0.6);
  EXPECT_EQ(all.faster_than_eager, 2);
  EXPECT_EQ(all.faster_than_compile, 1);
  EXPECT_EQ(all.evaluations, 2 + 2 + 1 + 2 + 0);
  // Rewards of the tasks that have one; the error has none.
  EXPECT_EQ(all.rewards.at(-1), 1);
  EXPECT_EQ(all.rewards.at(1), 1);
  EXPECT_EQ(all.rewards.at(2), 1);
  EXPECT_EQ(all.rewards.at(3), 1);
}

TEST(Metrics, FastPCountsCorrectTasksAboveEachThresholdOverAllTasks) {
  const Metrics all = compute_metrics(sample()).back();
  // kFastP = {0, 0.5, 0.8, 1, 1.5, 2}; speedups over eager 2, 0.5, 4; over compile 1.5, 0.4, 0.9.
  EXPECT_EQ(all.fast_p_eager, (std::vector<int>{3, 2, 2, 2, 2, 1}));
  EXPECT_EQ(all.fast_p_compile, (std::vector<int>{3, 2, 2, 1, 0, 0}));
}

TEST(Metrics, ASuiteWithoutLevelsHasOnlyTheOverallColumnAndNoTimingMeansNoGeomean) {
  std::vector<TaskResult> results{failed("a", "compile_error"), failed("b", "mismatch")};
  for (auto& r : results) r.level = "";
  const std::vector<Metrics> m = compute_metrics(results);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].level, "all");
  EXPECT_FALSE(m[0].geomean_vs_compile.has_value());
  EXPECT_TRUE(
      std::regex_search(format_metrics(m), std::regex("geomean speedup vs torch.compile +-\n")));
}

TEST(Metrics, TheTableHasOneColumnPerLevelAndTheFigures) {
  const std::string table = format_metrics(compute_metrics(sample()));
  EXPECT_NE(table.find("level1"), std::string::npos);
  EXPECT_NE(table.find("pass rate"), std::string::npos);
  EXPECT_NE(table.find("60.0%"), std::string::npos);
  EXPECT_NE(table.find("fast_1.5 vs eager / compile"), std::string::npos);
  EXPECT_NE(table.find("1 / 1 / 1 / 1"), std::string::npos);
}

TEST(Metrics, TheTaskTableHasARowPerTaskAndSaysWhyFailuresFailed) {
  std::vector<TaskResult> results = sample();
  results[2].reason = "outputs differ at [0, 3]";
  const std::string text = format_tasks(results);
  EXPECT_NE(text.find("level1/a"), std::string::npos);
  EXPECT_NE(text.find("1.50x"), std::string::npos);
  EXPECT_NE(text.find("level1/c: outputs differ at [0, 3]"), std::string::npos);
  EXPECT_EQ(text.find("level1/a: "), std::string::npos);  // a pass has no reason listed
}

TEST(TaskResult, SurvivesJson) {
  TaskResult r = timed("level1/a", 2, 1.5, 3);
  r.run = "r4";
  r.worker = "gpu 1";
  r.reason = "passed";
  const TaskResult back = TaskResult::from_json(r.to_json());
  EXPECT_EQ(back.to_json(), r.to_json());
  const TaskResult error = TaskResult::from_json(failed("level2/b", "error").to_json());
  EXPECT_FALSE(error.reward.has_value());
  EXPECT_FALSE(error.speedup_vs_compile.has_value());
}

TEST(Compare, TaskByTaskAndTheGeomeanOfTheRatioOnTasksBothTimed) {
  std::vector<TaskResult> a = sample();
  std::vector<TaskResult> b = sample();
  b[0] = timed("level1/a", 4.0, 3.0, 3);       // twice as fast
  b[2] = timed("level1/c", 1.0, 1.0, 1);       // fixed
  b[3] = failed("level2/a", "runtime_error");  // broken
  const std::string text = format_compare("b1", a, "b2", b);
  EXPECT_NE(text.find("2.00x"), std::string::npos);
  // Timed in both: level1/a (2x) and level1/b (1x): geomean sqrt(2).
  EXPECT_NE(text.find("on the 2 task(s) both timed: b2 faster on 1, slower on 0, within 5% on 1; "
                      "geomean b2 / b1 1.41x"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("correct in b2 only: 1; correct in b1 only: 1"), std::string::npos);
}

TEST(Html, SelfContainedWithFourPlotsAndAMarkPerDatum) {
  const std::string html = render_html("bench b1", {{"suite", "builtin"}}, sample());
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));
  EXPECT_EQ(html.find("src="), std::string::npos);
  for (const char* id : {"speedup-distribution", "speedup-vs-time", "level-bars", "rewards"}) {
    EXPECT_NE(html.find(std::string("id=\"") + id + "\""), std::string::npos) << id;
  }
  // The scatter: one dot per timed task.
  std::size_t scatter = html.find("id=\"speedup-vs-time\"");
  std::size_t end = html.find("</svg>", scatter);
  const std::string svg = html.substr(scatter, end - scatter);
  const std::regex dot("<circle class=\"mark\"");
  const std::ptrdiff_t dots =
      std::distance(std::sregex_iterator(svg.begin(), svg.end(), dot), std::sregex_iterator());
  EXPECT_EQ(dots, 3);
  // Task names are escaped.
  std::vector<TaskResult> odd{timed("level1/<b>", 2, 2, 3)};
  EXPECT_EQ(render_html("t", {}, odd).find("<b>"), std::string::npos);
}

}  // namespace
}  // namespace cuda_agent::report
