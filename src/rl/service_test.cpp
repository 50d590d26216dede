#include "rl/service.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace cuda_agent::rl {
namespace {

using json = nlohmann::json;

const std::map<std::string, std::filesystem::path> kTasks = {
    {"level1/001_relu", "/suite/level1/001_relu.py"}};

std::string refusal(const std::string& kind, const json& body) {
  WorkRequest r;
  Status s = parse_work_request(kind, body.dump(), kTasks, ServiceOptions{}, &r);
  return s.ok() ? "" : s.message();
}

TEST(ServiceRequests, AnEvaluationNamesATaskAndHandsInModelNewAndKernels) {
  WorkRequest r;
  const json body = {{"task", "level1/001_relu"},
                     {"files", {{"model_new.py", "m"}, {"kernels/a/b.cu", "k"}}},
                     {"recipe", "milestone"},
                     {"shrink", 4}};
  ASSERT_TRUE(parse_work_request("evaluate", body.dump(), kTasks, ServiceOptions{}, &r).ok());
  EXPECT_EQ(r.task_path, "/suite/level1/001_relu.py");
  EXPECT_EQ(r.files.size(), 2u);
  EXPECT_EQ(r.recipe, "milestone");
  EXPECT_EQ(r.shrink, 4);
  ServiceOptions o;
  o.binary = "/bin/cuda-agent";
  o.store = "/s.sqlite";
  o.device = "cuda";
  const std::vector<std::string> argv = work_argv(r, o, "/w/w1");
  const auto at = [&](const std::string& flag) {
    auto it = std::find(argv.begin(), argv.end(), flag);
    return it == argv.end() || it + 1 == argv.end() ? std::string() : *(it + 1);
  };
  EXPECT_EQ(argv[3], "eval");
  EXPECT_EQ(at("--store"), "/s.sqlite");
  EXPECT_EQ(at("--task"), "/suite/level1/001_relu.py");
  EXPECT_EQ(at("--candidate"), "/w/w1/candidate/model_new.py");
  EXPECT_EQ(at("--kernels"), "/w/w1/candidate/kernels");
  EXPECT_EQ(at("--device"), "cuda");
  EXPECT_EQ(at("--shrink"), "4");
  EXPECT_NE(std::find(argv.begin(), argv.end(), "--json"), argv.end());
  EXPECT_EQ(std::find(argv.begin(), argv.end(), "--tf32"), argv.end());  // fp32 by default
}

TEST(ServiceRequests, ARequestMayAskForTf32AndTheServiceMayDefaultToIt) {
  const json body = {{"task", "level1/001_relu"}, {"files", {{"model_new.py", "m"}}}};
  const auto asks_tf32 = [](const WorkRequest& r) {
    const std::vector<std::string> argv = work_argv(r, ServiceOptions{}, "/w/w1");
    return std::find(argv.begin(), argv.end(), "--tf32") != argv.end();
  };
  WorkRequest r;
  json tf32 = body;
  tf32["precision"] = "tf32";
  ASSERT_TRUE(parse_work_request("evaluate", tf32.dump(), kTasks, ServiceOptions{}, &r).ok());
  EXPECT_EQ(r.precision, "tf32");
  EXPECT_TRUE(asks_tf32(r));
  ServiceOptions defaults;
  defaults.precision = "tf32";
  ASSERT_TRUE(parse_work_request("evaluate", body.dump(), kTasks, defaults, &r).ok());
  EXPECT_TRUE(asks_tf32(r));
  json fp32 = body;
  fp32["precision"] = "fp32";
  ASSERT_TRUE(parse_work_request("evaluate", fp32.dump(), kTasks, defaults, &r).ok());
  EXPECT_FALSE(asks_tf32(r));
  EXPECT_NE(refusal("evaluate", {{"task", "level1/001_relu"},
                                 {"files", {{"model_new.py", "m"}}},
                                 {"precision", "fp16"}})
                .find("\"precision\" must be"),
            std::string::npos);
}

TEST(ServiceRequests, WhatIsWrongWithABodyIsSaid) {
  const json files = {{"model_new.py", "m"}};
  EXPECT_NE(refusal("evaluate", json::array()).find("not a JSON object"), std::string::npos);
  EXPECT_NE(refusal("evaluate", {{"files", files}}).find("\"task\" must be"), std::string::npos);
  EXPECT_NE(refusal("evaluate", {{"task", "x"}, {"files", files}}).find("no task \"x\""),
            std::string::npos);
  for (const char* path : {"../model_new.py", "kernels/../x.cu", "kernels/.hidden", "/abs.cu",
                           "kernels/", "kernels//a.cu", "utils/kernels.py", "model.py"}) {
    json bad = files;
    bad[path] = "x";
    EXPECT_NE(refusal("evaluate", {{"task", "level1/001_relu"}, {"files", bad}})
                  .find("is not model_new.py or a file beneath kernels/"),
              std::string::npos)
        << path;
  }
  json many = files;
  for (int i = 0; i < 300; ++i) many["kernels/k" + std::to_string(i) + ".cu"] = "";
  EXPECT_NE(refusal("evaluate", {{"task", "level1/001_relu"}, {"files", many}}).find("more than"),
            std::string::npos);
  EXPECT_NE(refusal("evaluate", {{"task", "level1/001_relu"}, {"files", files}, {"recipe", 3}})
                .find("\"recipe\" must be"),
            std::string::npos);
  EXPECT_NE(refusal("rollout", {{"task", "level1/001_relu"}, {"model", "m"}}).find("\"endpoint\""),
            std::string::npos);
  EXPECT_NE(
      refusal("rollout",
              {{"task", "level1/001_relu"}, {"model", "m"}, {"endpoint", "file:///etc/passwd"}})
          .find("http://"),
      std::string::npos);
  EXPECT_NE(refusal("rollout", {{"task", "level1/001_relu"},
                                {"model", "m"},
                                {"endpoint", "http://h/v1"},
                                {"api_key_env", "A; rm -rf /"}})
                .find("environment variable"),
            std::string::npos);
}

TEST(ServiceRequests, ARolloutRunsTheAgentAgainstTheGivenEndpoint) {
  WorkRequest r;
  const json body = {{"task", "level1/001_relu"}, {"endpoint", "http://127.0.0.1:8000/v1"},
                     {"model", "policy"},         {"max_turns", 12},
                     {"temperature", 0.7},        {"api_key_env", "POLICY_KEY"}};
  ASSERT_TRUE(parse_work_request("rollout", body.dump(), kTasks, ServiceOptions{}, &r).ok());
  ServiceOptions o;
  const std::vector<std::string> argv = work_argv(r, o, "/w/w2");
  const std::string line = [&] {
    std::string all;
    for (const auto& a : argv) all += a + " ";
    return all;
  }();
  EXPECT_NE(line.find("optimize /suite/level1/001_relu.py --policy llm --endpoint "
                      "http://127.0.0.1:8000/v1 --model policy --workspace /w/w2/workspace"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("--max-turns 12"), std::string::npos);
  EXPECT_NE(line.find("--temperature 0.69999999999999996"), std::string::npos) << line;
  EXPECT_NE(line.find("--api-key-env POLICY_KEY"), std::string::npos);
}

}  // namespace
}  // namespace cuda_agent::rl
