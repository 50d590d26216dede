#include "bench/bench.h"

#include <gtest/gtest.h>

#include <mutex>
#include <set>

#include "eval/result.h"
#include "util/files.h"

namespace cuda_agent::bench {
namespace {

/// Answers each job as the episode for its task would, without running anything: tasks whose
/// file name holds "bad" fail verification, "stop" is interrupted (the bench is stopped there).
class FakeExecutor : public Executor {
 public:
  int slots() const override { return 2; }
  std::string name() const override { return "fake"; }
  int devices() const override { return 1; }
  JobOutput run(int slot, const Job& job) override {
    {
      std::lock_guard<std::mutex> lock(mu);
      ran.push_back(job.task);
      argvs.push_back(job.argv);
    }
    JobOutput out;
    out.started = true;
    out.wall_s = 2;
    out.worker = "fake " + std::to_string(slot);
    if (job.task.find("stop") != std::string::npos) {
      out.interrupted = true;
      return out;
    }
    if (crash && job.task.find("crash") != std::string::npos) {
      out.exit_code = 2;  // no result printed: an error, not a verdict
      return out;
    }
    if (job.task.find("noplan") != std::string::npos) {
      out.exit_code = kEpisodeNoCandidate;
      return out;
    }
    EvalResult e;
    e.id = 7;
    e.device_name = "Fake GPU";
    if (job.task.find("bad") != std::string::npos) {
      e.outcome = Outcome::kMismatch;
      e.reason = "outputs differ";
      e.reward = -1;
      out.exit_code = 1;
    } else {
      e.correct = true;
      e.eager_us = 200;
      e.compile_us = 100;
      e.candidate_us = 50;
      e.speedup_vs_eager = 4;
      e.speedup_vs_compile = 2;
      e.reward = 3;
      out.exit_code = 0;
    }
    nlohmann::json j = e.to_json();
    j["run"] = "r1";
    j["evaluation_count"] = 3;
    out.out = j.dump();
    return out;
  }
  bool crash = true;
  std::mutex mu;
  std::vector<std::string> ran;
  std::vector<std::vector<std::string>> argvs;
};

struct Fixture {
  TempDir dir;
  std::unique_ptr<Store> store;
  BenchRequest request;
  Fixture(std::vector<std::string> tasks) {
    EXPECT_TRUE(Store::Open(dir.path() / "store.sqlite", &store).ok());
    request.settings.suite = dir.path() / "suite";
    request.settings.suite_name = "test";
    request.settings.tasks = std::move(tasks);
    request.binary = "/bin/cuda-agent";
    request.store = store->path();
    request.work_root = dir.path() / "work";
  }
};

/// The keys (TaskResult::key) of run 1's stored results.
std::set<std::string> stored_keys(Store* store) {
  std::vector<nlohmann::json> rows;
  EXPECT_TRUE(store->list_bench_results(1, &rows).ok());
  std::set<std::string> keys;
  for (const auto& r : rows) keys.insert(report::TaskResult::from_json(r).key());
  return keys;
}

/// Resumes run 1 after renaming its second task (the one that stopped it: now it runs) in the
/// run's recorded settings; again runs the episodes.
BenchSummary resume_renamed(Fixture& f, FakeExecutor* again) {
  nlohmann::json record;
  EXPECT_TRUE(f.store->get_bench(1, &record).ok());
  record["settings"]["tasks"][1] = "level1/002_go";
  EXPECT_TRUE(f.store->put_bench(1, record).ok());
  BenchRequest resume = f.request;
  resume.resume = 1;
  resume.settings = {};
  BenchSummary summary;
  EXPECT_TRUE(run_bench(resume, f.store.get(), again, &summary).ok());
  return summary;
}

TEST(Bench, EveryTaskIsRecordedWithItsResult) {
  Fixture f({"level1/001_a", "level1/002_bad", "level2/001_c"});
  FakeExecutor executor;
  BenchSummary summary;
  ASSERT_TRUE(run_bench(f.request, f.store.get(), &executor, &summary).ok());
  EXPECT_EQ(summary.ran, 3);
  EXPECT_EQ(summary.pending, 0);
  ASSERT_EQ(summary.results.size(), 3u);
  EXPECT_EQ(summary.results[0].outcome, "pass");
  EXPECT_EQ(summary.results[0].evaluations, 3);
  EXPECT_EQ(summary.results[0].level, "level1");
  EXPECT_EQ(summary.results[1].outcome, "mismatch");
  EXPECT_FALSE(summary.results[1].correct);
  EXPECT_EQ(summary.record["device_name"], "Fake GPU");
  EXPECT_EQ(summary.record["throughput"]["evaluations"], 9);
  // Each episode runs optimize on its task file, in a workspace of its own under the run.
  const std::vector<std::string>& argv = executor.argvs[0];
  EXPECT_NE(std::find(argv.begin(), argv.end(), "optimize"), argv.end());
  EXPECT_NE(std::find(argv.begin(), argv.end(), "--json"), argv.end());
  const auto ws = std::find(argv.begin(), argv.end(), "--workspace");
  ASSERT_NE(ws, argv.end());
  EXPECT_NE(ws[1].find("b1/level"), std::string::npos);
  nlohmann::json stored;
  std::vector<report::TaskResult> results;
  ASSERT_TRUE(load_bench(f.store.get(), "b1", &stored, &results).ok());
  EXPECT_EQ(results.size(), 3u);
}

TEST(Bench, AnInterruptedRunResumesWithTheTasksItLacksOnly) {
  Fixture f({"level1/001_a", "level1/002_stop", "level1/003_b", "level1/004_c"});
  {
    FakeExecutor executor;
    BenchSummary summary;
    ASSERT_TRUE(run_bench(f.request, f.store.get(), &executor, &summary).ok());
    EXPECT_GT(summary.pending, 0);
    // The interrupted task has no result.
    for (const auto& r : summary.results) EXPECT_NE(r.task, "level1/002_stop");
  }
  const std::set<std::string> had = stored_keys(f.store.get());
  FakeExecutor again;
  const BenchSummary summary = resume_renamed(f, &again);
  EXPECT_EQ(summary.pending, 0);
  EXPECT_EQ(summary.results.size(), 4u);
  for (const std::string& task : again.ran) EXPECT_FALSE(had.count(task)) << task << " ran twice";
  EXPECT_EQ(summary.record["sessions"].size(), 2u);
  EXPECT_FALSE(summary.record["sessions"][0]["complete"].get<bool>());
  EXPECT_TRUE(summary.record["sessions"][1]["complete"].get<bool>());
}

TEST(Bench, AnEpisodeThatEndedInAnErrorRunsAgainOnResume) {
  Fixture f({"level1/001_a", "level1/002_crash", "level1/003_bad", "level1/004_noplan"});
  {
    FakeExecutor executor;
    BenchSummary summary;
    ASSERT_TRUE(run_bench(f.request, f.store.get(), &executor, &summary).ok());
    ASSERT_EQ(summary.results.size(), 4u);
    EXPECT_EQ(summary.results[1].outcome, "error");
    EXPECT_EQ(summary.results[3].outcome, "no_plan");
  }
  FakeExecutor again;
  again.crash = false;  // whatever failed under it (the device's memory, say) is gone
  BenchRequest resume = f.request;
  resume.resume = 1;
  resume.settings = {};
  BenchSummary summary;
  ASSERT_TRUE(run_bench(resume, f.store.get(), &again, &summary).ok());
  // Only the error runs again: a verdict, pass or fail, stands, and so does a task the policy
  // has no plan for.
  EXPECT_EQ(again.ran, std::vector<std::string>{"level1/002_crash"});
  ASSERT_EQ(summary.results.size(), 4u);
  EXPECT_EQ(summary.results[1].outcome, "pass");
  EXPECT_TRUE(summary.record["sessions"][1]["complete"].get<bool>());
}

TEST(Bench, ATf32RunAsksEachEpisodeForItAndKeepsAskingOnResume) {
  Fixture f({"level1/001_a", "level1/002_stop", "level1/003_b"});
  f.request.settings.precision = "tf32";
  const auto asks_tf32 = [](const std::vector<std::string>& argv) {
    return std::find(argv.begin(), argv.end(), "--tf32") != argv.end();
  };
  {
    FakeExecutor executor;
    BenchSummary summary;
    ASSERT_TRUE(run_bench(f.request, f.store.get(), &executor, &summary).ok());
    ASSERT_FALSE(executor.argvs.empty());
    for (const auto& argv : executor.argvs) EXPECT_TRUE(asks_tf32(argv));
    EXPECT_EQ(summary.record["precision"], "tf32");
  }
  FakeExecutor again;
  resume_renamed(f, &again);  // the request's settings left empty: the run's own are used
  ASSERT_FALSE(again.argvs.empty());
  for (const auto& argv : again.argvs) EXPECT_TRUE(asks_tf32(argv));
  // A run in full fp32 asks for nothing.
  Fixture plain({"level1/001_a"});
  FakeExecutor fp32;
  BenchSummary summary;
  ASSERT_TRUE(run_bench(plain.request, plain.store.get(), &fp32, &summary).ok());
  EXPECT_FALSE(asks_tf32(fp32.argvs.at(0)));
  EXPECT_EQ(summary.record["precision"], "fp32");
}

TEST(Bench, ARunWithFreshBaselinesScopesEachEpisodesToItselfAndKeepsDoingSoOnResume) {
  Fixture f({"level1/001_a", "level1/002_stop", "level1/003_b"});
  f.request.settings.fresh_baselines = true;
  // The episode's baselines are the run's own (b1's), timed once in it.
  const auto scope = [](const std::vector<std::string>& argv) -> std::string {
    auto at = std::find(argv.begin(), argv.end(), "--baseline-scope");
    return at != argv.end() && at + 1 != argv.end() ? *(at + 1) : "";
  };
  {
    FakeExecutor executor;
    BenchSummary summary;
    ASSERT_TRUE(run_bench(f.request, f.store.get(), &executor, &summary).ok());
    ASSERT_FALSE(executor.argvs.empty());
    for (const auto& argv : executor.argvs) EXPECT_EQ(scope(argv), "b1");
    EXPECT_TRUE(summary.record["settings"]["fresh_baselines"].get<bool>());
  }
  FakeExecutor again;
  resume_renamed(f, &again);
  ASSERT_FALSE(again.argvs.empty());
  for (const auto& argv : again.argvs) EXPECT_EQ(scope(argv), "b1");
  // A run that does not ask shares the store's baselines.
  Fixture shared({"level1/001_a"});
  FakeExecutor executor;
  BenchSummary summary;
  ASSERT_TRUE(run_bench(shared.request, shared.store.get(), &executor, &summary).ok());
  EXPECT_EQ(scope(executor.argvs.at(0)), "");
}

TEST(Bench, AGroupRunsEachTaskGroupSizeTimes) {
  Fixture f({"level1/001_a", "level1/002_b"});
  f.request.settings.group_size = 3;
  FakeExecutor executor;
  BenchSummary summary;
  ASSERT_TRUE(run_bench(f.request, f.store.get(), &executor, &summary).ok());
  EXPECT_EQ(summary.pending, 0);
  ASSERT_EQ(summary.results.size(), 6u);
  std::set<std::string> keys;
  for (const auto& r : summary.results) {
    keys.insert(r.key());
    EXPECT_EQ(r.task.find('#'), std::string::npos) << "the task stays the suite's id";
  }
  EXPECT_EQ(keys, (std::set<std::string>{"level1/001_a#0", "level1/001_a#1", "level1/001_a#2",
                                         "level1/002_b#0", "level1/002_b#1", "level1/002_b#2"}));
  // Each episode has a workspace of its own.
  std::set<std::string> workspaces;
  for (const auto& argv : executor.argvs) {
    workspaces.insert(*(std::find(argv.begin(), argv.end(), "--workspace") + 1));
  }
  EXPECT_EQ(workspaces.size(), 6u);
  nlohmann::json record;
  ASSERT_TRUE(f.store->get_bench(1, &record).ok());
  EXPECT_EQ(record["settings"]["group_size"], 3);
}

TEST(Bench, AnInterruptedGroupRunResumesWithTheEpisodesItLacksOnly) {
  Fixture f({"level1/001_a", "level1/002_stop"});
  f.request.settings.group_size = 2;
  {
    FakeExecutor executor;
    BenchSummary summary;
    ASSERT_TRUE(run_bench(f.request, f.store.get(), &executor, &summary).ok());
    EXPECT_GT(summary.pending, 0);
  }
  const std::set<std::string> had = stored_keys(f.store.get());
  FakeExecutor again;
  const BenchSummary summary = resume_renamed(f, &again);
  EXPECT_EQ(summary.pending, 0);
  ASSERT_EQ(summary.results.size(), 4u);
  for (const std::string& key : again.ran) EXPECT_FALSE(had.count(key)) << key << " ran twice";
  std::set<std::string> keys;
  for (const auto& r : summary.results) keys.insert(r.key());
  EXPECT_EQ(keys, (std::set<std::string>{"level1/001_a#0", "level1/001_a#1", "level1/002_go#0",
                                         "level1/002_go#1"}));
}

TEST(Bench, AnEpisodeWithoutVerdictOrPastItsLimitIsAFailureThatSaysWhy) {
  JobOutput error;
  error.started = true;
  error.exit_code = 2;
  error.error = "the task's Model failed: RuntimeError";
  report::TaskResult r = parse_episode("level3/x", "level3", error);
  EXPECT_EQ(r.outcome, "error");
  EXPECT_FALSE(r.correct);
  EXPECT_EQ(r.reason, "the task's Model failed: RuntimeError");
  JobOutput no_plan;
  no_plan.started = true;
  no_plan.exit_code = kEpisodeNoCandidate;
  no_plan.error = "the synthesizer has no plan for x";
  r = parse_episode("level3/x", "level3", no_plan);
  EXPECT_EQ(r.outcome, "no_plan");
  EXPECT_FALSE(r.correct);
  EXPECT_EQ(r.reason, "the synthesizer has no plan for x");
  JobOutput late;
  late.started = true;
  late.timed_out = true;
  r = parse_episode("level3/x", "level3", late);
  EXPECT_EQ(r.outcome, "timeout");
  EXPECT_EQ(r.reward, -1);
  JobOutput garbled;
  garbled.started = true;
  garbled.exit_code = 0;
  garbled.out = "{not json";
  EXPECT_EQ(parse_episode("a", "", garbled).outcome, "error");
}

TEST(Bench, RunNamesAndThroughput) {
  EXPECT_EQ(bench_name(12), "b12");
  EXPECT_EQ(parse_bench_name("b12"), 12);
  EXPECT_EQ(parse_bench_name("12"), 12);
  EXPECT_FALSE(parse_bench_name("r12").has_value());
  nlohmann::json record = {
      {"throughput",
       {{"evaluations", 30}, {"device_hours", 0.5}, {"wall_s", 900}, {"devices", 2}}}};
  EXPECT_EQ(format_throughput(record),
            "30 candidates evaluated in 0.50 device-hours (15m00s wall on 2 device(s)): 60 per "
            "device-hour");
}

}  // namespace
}  // namespace cuda_agent::bench
