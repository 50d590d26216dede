#include "rl/export.h"

#include <gtest/gtest.h>

#include <cmath>

#include "eval/result.h"
#include "util/files.h"

namespace cuda_agent::rl {
namespace {

using json = nlohmann::json;

/// A final evaluation: passing with the given speedups over eager and torch.compile, or failed
/// with outcome.
json final_of(Outcome outcome, double over_eager = 1, double over_compile = 1) {
  EvalResult e;
  e.outcome = outcome;
  e.compiled = outcome != Outcome::kCompileError;
  e.correct = outcome == Outcome::kPass;
  if (outcome == Outcome::kPass) {
    e.candidate_us = 100;
    e.eager_us = 100 * over_eager;
    e.compile_us = 100 * over_compile;
    e.speedup_vs_eager = over_eager;
    e.speedup_vs_compile = over_compile;
  }
  return e.to_json();
}

/// "c<t>" (built so, as GCC 12 warns falsely of "c" + a number's text).
std::string call_id(int t) {
  std::string id = std::to_string(t);
  id.insert(id.begin(), 'c');
  return id;
}

/// A trajectory of task whose assistant says what, over turns assistant turns.
json trajectory(const std::string& task, const std::string& what, int turns, json final) {
  json messages = json::array({{{"role", "system"}, {"content", "sys"}},
                               {{"role", "user"}, {"content", "make " + task + " fast"}}});
  for (int t = 0; t < turns; ++t) {
    messages.push_back(
        {{"role", "assistant"},
         {"content", what},
         {"tool_calls",
          json::array(
              {{{"id", call_id(t)},
                {"type", "function"},
                {"function", {{"name", "Write"}, {"arguments", "{\"file_path\": \"x\"}"}}}}})}});
    messages.push_back({{"role", "tool"}, {"tool_call_id", call_id(t)}, {"content", "ok"}});
  }
  messages.push_back({{"role", "assistant"}, {"content", "done"}});
  return {{"schema", "cuda-agent.trajectory.v1"},
          {"policy", "llm"},
          {"model", "m"},
          {"task", {{"id", task}}},
          {"tools", json::array({"Write", "Bash"})},
          {"messages", messages},
          {"final", std::move(final)}};
}

report::TaskResult result_for(const std::string& task, int sample, long long run) {
  report::TaskResult r;
  r.task = task;
  r.sample = sample;
  r.outcome = "pass";
  r.run = run ? "r" + std::to_string(run) : "";
  return r;
}

TEST(Rollouts, EachEpisodeCarriesItsRewardAdvantageWithinItsTaskAndReturnsPerTurn) {
  TempDir dir;
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(dir.path() / "s.sqlite", &store).ok());
  // Task a: rewards 3 (faster than both), 1 (correct only), -1 (wrong). Task b: one episode
  // that reached no verdict and one that never filed a trajectory; its last one scores 2.
  std::vector<json> trajectories = {
      trajectory("t/a", "fast", 2, final_of(Outcome::kPass, 2, 1.5)),
      trajectory("t/a", "slow", 1, final_of(Outcome::kPass, 0.5, 0.5)),
      trajectory("t/a", "wrong", 3, final_of(Outcome::kMismatch)),
      trajectory("t/b", "cut", 1, json()),
      trajectory("t/b", "ok", 1, final_of(Outcome::kPass, 2, 1.0)),
  };
  std::vector<long long> ids;
  for (const json& t : trajectories) {
    long long id = 0;
    ASSERT_TRUE(store->add_trajectory(t, &id).ok());
    ids.push_back(id);
  }
  std::vector<report::TaskResult> results = {
      result_for("t/a", 2, ids[2]), result_for("t/a", 0, ids[0]), result_for("t/a", 1, ids[1]),
      result_for("t/b", 0, ids[3]), result_for("t/b", 1, 0),      result_for("t/b", 2, ids[4])};
  results[4].outcome = "error";
  results[4].reason = "the endpoint refused";
  RolloutOptions options;
  options.gamma = 0.5;
  std::vector<json> records;
  std::vector<Dropped> dropped;
  ASSERT_TRUE(build_rollouts(store.get(), results, options, &records, &dropped).ok());
  ASSERT_EQ(records.size(), 4u);
  ASSERT_EQ(dropped.size(), 2u);
  EXPECT_EQ(dropped[0].key, "t/b#0");
  EXPECT_NE(dropped[0].why.find("no verdict"), std::string::npos);
  EXPECT_EQ(dropped[1].key, "t/b#1");
  EXPECT_NE(dropped[1].why.find("the endpoint refused"), std::string::npos);
  // Task a in sample order: rewards 3, 1, -1; mean 1, sample std 2: advantages 1, 0, -1.
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(records[k]["task"], "t/a");
    EXPECT_EQ(records[k]["sample"], k);
    EXPECT_EQ(records[k]["group_size"], 3);
  }
  EXPECT_EQ(records[0]["reward"], 3.0);
  EXPECT_EQ(records[1]["reward"], 1.0);
  EXPECT_EQ(records[2]["reward"], -1.0);
  EXPECT_NEAR(records[0]["advantage"].get<double>(), 1, 1e-6);
  EXPECT_NEAR(records[1]["advantage"].get<double>(), 0, 1e-9);
  EXPECT_NEAR(records[2]["advantage"].get<double>(), -1, 1e-6);
  // Returns: one per assistant turn (2 tool-calling turns and the closing one), discounted.
  EXPECT_EQ(records[0]["returns"], json({0.75, 1.5, 3.0}));
  EXPECT_EQ(records[2]["returns"], json({-0.125, -0.25, -0.5, -1.0}));
  // Task b's group is its one episode with a verdict: nothing to compare it with.
  EXPECT_EQ(records[3]["task"], "t/b");
  EXPECT_EQ(records[3]["reward"], 2.0);
  EXPECT_EQ(records[3]["advantage"], 0.0);
  EXPECT_EQ(records[3]["group_size"], 1);
  // The chat as the model saw it, with the specs of the tools it was offered.
  EXPECT_EQ(records[0]["messages"][0]["role"], "system");
  ASSERT_EQ(records[0]["tools"].size(), 2u);
  EXPECT_EQ(records[0]["tools"][0]["function"]["name"], "Bash");
  EXPECT_EQ(records[0]["tools"][1]["function"]["name"], "Write");
  EXPECT_TRUE(records[0]["tools"][1]["function"]["parameters"].is_object());

  // Another recipe, another estimator: log-speedups ln 1.5, ln 0.5, -1; mean subtracted only.
  options.recipe = "log_speedup";
  options.estimator = "grpo_mean";
  ASSERT_TRUE(build_rollouts(store.get(), results, options, &records, &dropped).ok());
  const double mean = (std::log(1.5) + std::log(0.5) - 1) / 3;
  EXPECT_NEAR(records[0]["reward"].get<double>(), std::log(1.5), 1e-12);
  EXPECT_NEAR(records[0]["advantage"].get<double>(), std::log(1.5) - mean, 1e-12);
  EXPECT_NEAR(records[2]["advantage"].get<double>(), -1 - mean, 1e-12);
  options.recipe = "vibes";
  EXPECT_FALSE(build_rollouts(store.get(), results, options, &records, &dropped).ok());
}

TEST(Warmup, RejectionSamplingKeepsTheBestDistinctEpisodesOfEachTaskUpToTheCap) {
  std::vector<json> ts = {
      trajectory("t/a", "one", 1, final_of(Outcome::kPass, 2, 2)),     // 3
      trajectory("t/a", "one", 1, final_of(Outcome::kPass, 2, 2)),     // 3, the same turns
      trajectory("t/a", "two", 1, final_of(Outcome::kPass, 2, 1)),     // 2
      trajectory("t/a", "three", 1, final_of(Outcome::kPass, 3, 3)),   // 3
      trajectory("t/a", "four", 1, final_of(Outcome::kPass, 0.5, 1)),  // 1: below
      trajectory("t/b", "one", 1, final_of(Outcome::kPass, 2, 1)),     // 2, another task
      trajectory("t/b", "bad", 1, final_of(Outcome::kViolation)),      // -1
      trajectory("t/c", "cut", 1, json()),                             // no verdict
  };
  for (std::size_t i = 0; i < ts.size(); ++i) ts[i]["id"] = static_cast<long long>(i + 1);
  ts[5]["policy"] = "synth";
  WarmupOptions options;
  options.per_task = 2;
  WarmupCounts counts;
  const std::vector<json> kept = select_warmup(ts, options, &counts);
  EXPECT_EQ(counts.considered, 8);
  EXPECT_EQ(counts.no_verdict, 1);
  EXPECT_EQ(counts.below, 2);
  EXPECT_EQ(counts.duplicates, 1);
  EXPECT_EQ(counts.over_cap, 1);  // t/a's reward-2 episode: two 3s come first
  EXPECT_EQ(counts.kept, 3);
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(kept[0]["run"], "r1");
  EXPECT_EQ(kept[1]["run"], "r4");
  EXPECT_EQ(kept[2]["run"], "r6");
  EXPECT_EQ(kept[2]["policy"], "synth");
  EXPECT_EQ(kept[0]["schema"], "cuda-agent.sft/1");
  EXPECT_EQ(kept[0]["messages"].back()["content"], "done");
  options.min_reward = 3;
  options.per_task = 10;
  EXPECT_EQ(select_warmup(ts, options, &counts).size(), 2u);
}

TEST(Exports, RecordsAreWrittenAsJsonLinesAndPromptsAsVerlRows) {
  TempDir dir;
  const json prompt = prompt_record("level1/001_relu", "sys", "user", "cuda", 1, 0);
  EXPECT_EQ(prompt["reward_model"]["ground_truth"], "level1/001_relu");
  EXPECT_EQ(prompt["prompt"][1]["content"], "user");
  ASSERT_TRUE(write_records({prompt, prompt}, dir.path() / "p.jsonl", "python3", "").ok());
  std::string text;
  ASSERT_TRUE(read_file(dir.path() / "p.jsonl", &text).ok());
  EXPECT_EQ(text, prompt.dump() + "\n" + prompt.dump() + "\n");
  Status no_writer =
      write_records({prompt}, dir.path() / "p.parquet", "python3", dir.path() / "missing.py");
  EXPECT_FALSE(no_writer.ok());
  EXPECT_NE(no_writer.message().find("Parquet"), std::string::npos);
  std::error_code ec;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "p.parquet", ec));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "p.parquet.jsonl.part", ec));
}

}  // namespace
}  // namespace cuda_agent::rl
