#include "store/store.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "util/files.h"

namespace cuda_agent {
namespace {

TEST(Store, BaselinesSurviveReopening) {
  TempDir dir;
  auto path = dir.path() / "store.sqlite";
  {
    std::unique_ptr<Store> store;
    ASSERT_TRUE(Store::Open(path, &store).ok());
    std::optional<nlohmann::json> cached;
    ASSERT_TRUE(store->get_baseline("k", &cached).ok());
    EXPECT_FALSE(cached.has_value());
    ASSERT_TRUE(store->put_baseline("k", {{"median_us", 123.5}}).ok());
  }
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(path, &store).ok());
  std::optional<nlohmann::json> cached;
  ASSERT_TRUE(store->get_baseline("k", &cached).ok());
  ASSERT_TRUE(cached.has_value());
  EXPECT_DOUBLE_EQ((*cached)["median_us"].get<double>(), 123.5);
}

TEST(Store, KnowsWhetherATaskHasABaselineOnADeviceWhateverItsOtherSettings) {
  TempDir dir;
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(dir.path() / "store.sqlite", &store).ok());
  auto settings = [](const std::string& impl, const std::string& device, int iters) {
    return nlohmann::json{{"median_us", 1.0},
                          {"settings",
                           {{"task_sha256", "abc"},
                            {"impl", impl},
                            {"device", device},
                            {"device_name", "NVIDIA H200"},
                            {"iters", iters}}}};
  };
  ASSERT_TRUE(store->put_baseline("k1", settings("eager", "cuda", 100)).ok());
  ASSERT_TRUE(store->put_baseline("k2", settings("compile", "cpu", 20)).ok());
  bool found = false;
  ASSERT_TRUE(store->has_baseline("abc", "eager", "cuda", &found).ok());
  EXPECT_TRUE(found);
  ASSERT_TRUE(store->has_baseline("abc", "compile", "cuda", &found).ok());
  EXPECT_FALSE(found);  // compiled on the cpu only
  ASSERT_TRUE(store->has_baseline("abc", "compile", "cpu", &found).ok());
  EXPECT_TRUE(found);
  ASSERT_TRUE(store->has_baseline("other", "eager", "cuda", &found).ok());
  EXPECT_FALSE(found);
}

TEST(Store, BenchResultsAreKeptPerTaskAndSurviveReopening) {
  TempDir dir;
  auto path = dir.path() / "store.sqlite";
  long long bench = 0;
  {
    std::unique_ptr<Store> store;
    ASSERT_TRUE(Store::Open(path, &store).ok());
    ASSERT_TRUE(store->add_bench({{"policy", "synth"}}, &bench).ok());
    ASSERT_TRUE(store->put_bench_result(bench, "level1/002_b", {{"reward", -1}}).ok());
    ASSERT_TRUE(store->put_bench_result(bench, "level1/001_a", {{"reward", 1}}).ok());
    // A task run again replaces its result.
    ASSERT_TRUE(store->put_bench_result(bench, "level1/002_b", {{"reward", 3}}).ok());
    ASSERT_TRUE(store->put_bench(bench, {{"policy", "synth"}, {"sessions", 1}}).ok());
  }
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(path, &store).ok());
  std::vector<nlohmann::json> results;
  ASSERT_TRUE(store->list_bench_results(bench, &results).ok());
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0]["reward"], 1);
  EXPECT_EQ(results[1]["reward"], 3);
  nlohmann::json record;
  ASSERT_TRUE(store->get_bench(bench, &record).ok());
  EXPECT_EQ(record["sessions"], 1);
  EXPECT_EQ(store->get_bench(bench + 1, &record).code(), Status::Code::kNotFound);
  EXPECT_EQ(store->put_bench(bench + 1, record).code(), Status::Code::kNotFound);
  ASSERT_TRUE(store->list_bench_results(bench + 1, &results).ok());
  EXPECT_TRUE(results.empty());
}

TEST(Store, TuningWinnersAreKeptPerPatternShapeClassAndDevice) {
  TempDir dir;
  auto path = dir.path() / "store.sqlite";
  const TuningKey h200{"abc", "rows of 2^12, 2^16 of them", "NVIDIA H200"};
  {
    std::unique_ptr<Store> store;
    ASSERT_TRUE(Store::Open(path, &store).ok());
    ASSERT_TRUE(store->put_tuning(h200, {{"config", 5}}).ok());
    ASSERT_TRUE(store->put_tuning(h200, {{"config", 6}}).ok());  // a re-tune replaces it
  }
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(path, &store).ok());
  std::optional<nlohmann::json> found;
  ASSERT_TRUE(store->get_tuning(h200, &found).ok());
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ((*found)["config"], 6);
  // Another GPU, or sizes of another class, start untuned.
  ASSERT_TRUE(store->get_tuning({"abc", h200.shape_class, "NVIDIA H100"}, &found).ok());
  EXPECT_FALSE(found.has_value());
  ASSERT_TRUE(store->get_tuning({"abc", "rows of 2^13, 2^16 of them", h200.device}, &found).ok());
  EXPECT_FALSE(found.has_value());
}

TEST(Store, TheLastDeviceNameIsTheLatestEvaluationsOfThatKind) {
  TempDir dir;
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(dir.path() / "s.sqlite", &store).ok());
  std::optional<std::string> name;
  ASSERT_TRUE(store->last_device_name("cuda", &name).ok());
  EXPECT_FALSE(name.has_value());
  long long id = 0;
  auto add = [&](const char* device, const char* device_name) {
    nlohmann::json r = nlohmann::json::object();
    r["device"] = device;
    r["device_name"] = device_name;
    ASSERT_TRUE(store->add_evaluation(r, &id).ok());
  };
  add("cuda", "NVIDIA H100");
  add("cuda", "NVIDIA H200");
  add("cuda", "");  // a compile-only evaluation names no device
  add("cpu", "Intel Xeon");
  ASSERT_TRUE(store->last_device_name("cuda", &name).ok());
  EXPECT_EQ(name, "NVIDIA H200");
  ASSERT_TRUE(store->last_device_name("cpu", &name).ok());
  EXPECT_EQ(name, "Intel Xeon");
}

TEST(Store, WorkspacesRoundTripAndUnknownOnesAreNotFound) {
  TempDir dir;
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(dir.path() / "s.sqlite", &store).ok());
  WorkspaceRecord in{"/w", "/t.py", "abc", "class Model: ...", "cpu", {{"utils/kernels.py", "ff"}}};
  ASSERT_TRUE(store->put_workspace(in).ok());
  WorkspaceRecord out;
  ASSERT_TRUE(store->get_workspace("/w", &out).ok());
  EXPECT_EQ(out.task_source, in.task_source);
  EXPECT_EQ(out.checksums, in.checksums);
  ASSERT_TRUE(store->delete_workspace("/w").ok());
  EXPECT_EQ(store->get_workspace("/w", &out).code(), Status::Code::kNotFound);
  EXPECT_TRUE(store->delete_workspace("/never-there").ok());
  Status missing = store->get_workspace("/elsewhere", &out);
  EXPECT_EQ(missing.code(), Status::Code::kNotFound);
  EXPECT_NE(missing.message().find("cuda-agent init"), std::string::npos);
}

TEST(Store, EvaluationsAreAppendedWithIds) {
  TempDir dir;
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(dir.path() / "s.sqlite", &store).ok());
  long long first = 0, second = 0, count = 0;
  ASSERT_TRUE(store->add_evaluation({{"task", {{"id", "a"}}}, {"reward", 3}}, &first).ok());
  ASSERT_TRUE(store->add_evaluation({{"task", {{"id", "b"}}}, {"reward", -1}}, &second).ok());
  EXPECT_LT(first, second);
  ASSERT_TRUE(store->count_evaluations(&count).ok());
  EXPECT_EQ(count, 2);
  nlohmann::json back;
  ASSERT_TRUE(store->get_evaluation(second, &back).ok());
  EXPECT_EQ(back["reward"], -1);
}

TEST(Store, ProcessesOpeningAFreshStoreAtOnceAllGetIt) {
  // Several evaluations started together on a new machine (a benchmark's parallel jobs) each
  // open the store while the first is still creating it: each waits its turn, none fails.
  for (int round = 0; round < 4; ++round) {
    TempDir dir;
    const auto path = dir.path() / "store.sqlite";
    constexpr int kJobs = 48;
    std::vector<pid_t> children;
    for (int j = 0; j < kJobs; ++j) {
      const pid_t pid = fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        std::unique_ptr<Store> store;
        long long id = 0;
        Status s = Store::Open(path, &store);
        if (s.ok()) s = store->add_evaluation({{"job", j}}, &id);
        if (!s.ok()) std::fprintf(stderr, "job %d: %s\n", j, s.message().c_str());
        _exit(s.ok() ? 0 : 1);
      }
      children.push_back(pid);
    }
    int failed = 0;
    for (pid_t pid : children) {
      int status = 0;
      waitpid(pid, &status, 0);
      failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    EXPECT_EQ(failed, 0) << "round " << round;
    std::unique_ptr<Store> store;
    ASSERT_TRUE(Store::Open(path, &store).ok());
    long long count = 0;
    ASSERT_TRUE(store->count_evaluations(&count).ok());
    EXPECT_EQ(count, kJobs);
  }
}

TEST(Store, UnopenablePathIsAnError) {
  std::unique_ptr<Store> store;
  Status s = Store::Open("/proc/no/such/dir/store.sqlite", &store);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/proc/no/such/dir/store.sqlite"), std::string::npos);
}

}  // namespace
}  // namespace cuda_agent

namespace cuda_agent {
namespace {

TEST(Store, PartialEvaluationWithoutARewardIsStored) {
  TempDir dir;
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(dir.path() / "s.sqlite", &store).ok());
  long long id = 0;
  ASSERT_TRUE(store->add_evaluation({{"reward", nullptr}, {"stage", "verify"}}, &id).ok());
  nlohmann::json back;
  ASSERT_TRUE(store->get_evaluation(id, &back).ok());
  EXPECT_TRUE(back["reward"].is_null());
}

}  // namespace
}  // namespace cuda_agent

namespace cuda_agent {
namespace {

TEST(Store, TrajectoriesAreFiledUnderRunIds) {
  TempDir dir;
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(dir.path() / "s.sqlite", &store).ok());
  long long a = 0, b = 0;
  ASSERT_TRUE(
      store->add_trajectory({{"task", {{"id", "t"}}}, {"policy", "llm"}, {"reward", 3}}, &a).ok());
  ASSERT_TRUE(store->add_trajectory({{"task", {{"id", "u"}}}, {"policy", "llm"}}, &b).ok());
  EXPECT_NE(a, b);
  nlohmann::json back;
  ASSERT_TRUE(store->get_trajectory(a, &back).ok());
  EXPECT_EQ(back["reward"], 3);
  Status missing = store->get_trajectory(b + 10, &back);
  EXPECT_EQ(missing.code(), Status::Code::kNotFound);
  EXPECT_NE(missing.message().find("run r"), std::string::npos);
  std::vector<nlohmann::json> listed;
  ASSERT_TRUE(store->list_trajectories(0, &listed).ok());
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0]["id"], a);
  EXPECT_EQ(listed[1]["task"]["id"], "u");
  ASSERT_TRUE(store->list_trajectories(a, &listed).ok());
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0]["id"], b);
}

TEST(Store, BaselinesCopyIntoAnotherStoreWithoutOverwriting) {
  TempDir dir;
  std::unique_ptr<Store> run, episode;
  ASSERT_TRUE(Store::Open(dir.path() / "run.sqlite", &run).ok());
  ASSERT_TRUE(Store::Open(dir.path() / "episode.sqlite", &episode).ok());
  ASSERT_TRUE(run->put_baseline("a", {{"median_us", 1}}).ok());
  ASSERT_TRUE(run->put_baseline("b", {{"median_us", 2}}).ok());
  ASSERT_TRUE(episode->put_baseline("b", {{"median_us", 5}}).ok());
  ASSERT_TRUE(episode->copy_baselines_from(*run).ok());
  std::optional<nlohmann::json> got;
  ASSERT_TRUE(episode->get_baseline("a", &got).ok());
  EXPECT_EQ((*got)["median_us"], 1);
  ASSERT_TRUE(episode->get_baseline("b", &got).ok());
  EXPECT_EQ((*got)["median_us"], 5);
  // Evaluations list in order after an id.
  long long id = 0;
  ASSERT_TRUE(episode->add_evaluation({{"stage", "compile"}}, &id).ok());
  ASSERT_TRUE(episode->add_evaluation({{"stage", "verify"}}, &id).ok());
  std::vector<nlohmann::json> all;
  ASSERT_TRUE(episode->list_evaluations(0, &all).ok());
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[1]["stage"], "verify");
  EXPECT_EQ(all[1]["id"], id);
}

}  // namespace
}  // namespace cuda_agent
