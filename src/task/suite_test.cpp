#include "task/suite.h"

#include <gtest/gtest.h>

#include "util/files.h"

namespace fs = std::filesystem;

namespace cuda_agent {
namespace {

const char* kTask = R"(import torch
class Model(torch.nn.Module):
    def forward(self, x):
        return x + 1
def get_inputs():
    return [torch.randn(4)]
def get_init_inputs():
    return []
)";

void put(const fs::path& path, const std::string& text = kTask) {
  fs::create_directories(path.parent_path());
  ASSERT_TRUE(write_file_atomic(path, text).ok());
}

TEST(Suite, LevelFoldersGiveLevelledIds) {
  TempDir dir;
  put(dir.path() / "level2" / "001_b.py");
  put(dir.path() / "level1" / "002_a.py");
  put(dir.path() / "level1" / "001_a.py");
  put(dir.path() / "level1" / "_helpers.py");
  put(dir.path() / "level1" / "notes.txt");
  put(dir.path() / "misc" / "ignored.py");
  Suite suite;
  ASSERT_TRUE(load_suite(dir.path(), &suite).ok());
  ASSERT_EQ(suite.tasks.size(), 3u);
  EXPECT_EQ(suite.tasks[0].id, "level1/001_a");
  EXPECT_EQ(suite.tasks[1].id, "level1/002_a");
  EXPECT_EQ(suite.tasks[2].id, "level2/001_b");
  EXPECT_EQ(suite.tasks[2].level, "level2");
  EXPECT_EQ(suite.name, dir.path().filename().string());
}

TEST(Suite, AFlatFolderIsASuiteWithoutLevels) {
  TempDir dir;
  put(dir.path() / "relu.py");
  Suite suite;
  ASSERT_TRUE(load_suite(dir.path(), &suite).ok());
  ASSERT_EQ(suite.tasks.size(), 1u);
  EXPECT_EQ(suite.tasks[0].id, "relu");
  EXPECT_EQ(suite.tasks[0].level, "");
}

TEST(Suite, SuiteJsonNamesIt) {
  TempDir dir;
  put(dir.path() / "relu.py");
  put(dir.path() / "suite.json", R"({"name": "mine", "description": "d", "source": "s"})");
  Suite suite;
  ASSERT_TRUE(load_suite(dir.path(), &suite).ok());
  EXPECT_EQ(suite.name, "mine");
  EXPECT_EQ(suite.description, "d");
  EXPECT_EQ(suite.source, "s");
}

TEST(Suite, BadFoldersAreErrorsThatSayWhy) {
  TempDir dir;
  Suite suite;
  Status missing = load_suite(dir.path() / "nope", &suite);
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("does not exist"), std::string::npos);
  Status empty = load_suite(dir.path(), &suite);
  EXPECT_FALSE(empty.ok());
  EXPECT_NE(empty.message().find("no task files"), std::string::npos);
  put(dir.path() / "relu.py");
  put(dir.path() / "suite.json", "{not json");
  Status malformed = load_suite(dir.path(), &suite);
  EXPECT_FALSE(malformed.ok());
  EXPECT_NE(malformed.message().find("suite.json"), std::string::npos);
  put(dir.path() / "suite.json", R"({"name": 3})");
  EXPECT_FALSE(load_suite(dir.path(), &suite).ok());
}

TEST(Suite, FindSuitesListsTheSuitesInAFolder) {
  TempDir dir;
  put(dir.path() / "b" / "level1" / "x.py");
  put(dir.path() / "a" / "y.py");
  fs::create_directories(dir.path() / "empty");
  auto suites = find_suites(dir.path());
  ASSERT_EQ(suites.size(), 2u);
  EXPECT_EQ(suites[0].name, "a");
  EXPECT_EQ(suites[1].name, "b");
}

TEST(Suite, TheBuiltInSuiteHasItsThreeLevels) {
  Suite suite;
  ASSERT_TRUE(load_suite(builtin_suite_dir(), &suite).ok());
  EXPECT_EQ(suite.name, "builtin");
  std::map<std::string, int> levels;
  for (const auto& t : suite.tasks) levels[t.level]++;
  EXPECT_GE(levels["level1"], 40);
  EXPECT_GE(levels["level2"], 40);
  EXPECT_GE(levels["level3"], 10);
}

}  // namespace
}  // namespace cuda_agent

namespace cuda_agent {
namespace {

TEST(SuiteSelection, PatternsChooseTasksInOrderAndAStarCrossesLevels) {
  Suite suite;
  suite.name = "s";
  for (const char* id : {"level1/001_relu", "level1/002_gelu", "level2/001_relu_bias"}) {
    suite.tasks.push_back({id, "", std::string(id) + ".py"});
  }
  std::vector<SuiteTask> chosen;
  ASSERT_TRUE(select_tasks(suite, {}, &chosen).ok());
  EXPECT_EQ(chosen.size(), 3u);
  ASSERT_TRUE(select_tasks(suite, {"*relu*"}, &chosen).ok());
  ASSERT_EQ(chosen.size(), 2u);
  EXPECT_EQ(chosen[0].id, "level1/001_relu");
  EXPECT_EQ(chosen[1].id, "level2/001_relu_bias");
  ASSERT_TRUE(select_tasks(suite, {"level1/00[2]_*", "level2/*"}, &chosen).ok());
  ASSERT_EQ(chosen.size(), 2u);
  EXPECT_EQ(chosen[0].id, "level1/002_gelu");
  Status none = select_tasks(suite, {"level3/*"}, &chosen);
  EXPECT_FALSE(none.ok());
  EXPECT_NE(none.message().find("no task of suite s matches --filter"), std::string::npos);
}

}  // namespace
}  // namespace cuda_agent
