#include "task/dataset_import.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "task/suite.h"
#include "util/files.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace cuda_agent {
namespace {

std::string task_source(const std::string& op) {
  return "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return " +
         op +
         "\ndef get_inputs():\n    return [torch.randn(4)]\ndef get_init_inputs():\n"
         "    return []\n";
}

void put(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  ASSERT_TRUE(write_file_atomic(path, text).ok());
}

/// A ProcessRunner that must not be called (JSON Lines need no Python).
class NoRunner : public ProcessRunner {
 public:
  ProcessResult run(const ProcessSpec&) override {
    ADD_FAILURE() << "no process should run";
    return {};
  }
};

TEST(KernelBenchImport, LevelFoldersBecomeASuite) {
  TempDir dir;
  fs::path checkout = dir.path() / "KernelBench";
  put(checkout / "KernelBench" / "level1" / "19_ReLU.py", task_source("torch.relu(x)"));
  put(checkout / "KernelBench" / "level2" / "1_Conv.py", task_source("x * 2"));
  put(checkout / "KernelBench" / "level1" / "broken.py", "print('no model')\n");
  ImportOptions options;
  options.out = dir.path() / "suite";
  options.name = "kernelbench";
  ImportSummary summary;
  ASSERT_TRUE(import_kernelbench(checkout, options, &summary).ok());
  EXPECT_EQ(summary.imported, 2);
  ASSERT_EQ(summary.skipped.size(), 1u);
  EXPECT_NE(summary.skipped[0].find("broken.py"), std::string::npos);

  Suite suite;
  ASSERT_TRUE(load_suite(options.out, &suite).ok());
  EXPECT_EQ(suite.name, "kernelbench");
  ASSERT_EQ(suite.tasks.size(), 2u);
  EXPECT_EQ(suite.tasks[0].id, "level1/19_ReLU");
  EXPECT_EQ(suite.tasks[1].id, "level2/1_Conv");
}

TEST(KernelBenchImport, RefusesWhatIsNotACheckoutAndAFullOutFolder) {
  TempDir dir;
  ImportOptions options;
  options.out = dir.path() / "suite";
  ImportSummary summary;
  Status s = import_kernelbench(dir.path(), options, &summary);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("KernelBench checkout"), std::string::npos);

  put(dir.path() / "level1" / "1_a.py", task_source("x"));
  put(options.out / "already.txt", "x");
  s = import_kernelbench(dir.path(), options, &summary);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not empty"), std::string::npos);
}

fs::path write_records(const fs::path& path, const std::vector<std::string>& lines) {
  std::ofstream out(path);
  for (const auto& line : lines) out << line << "\n";
  return path;
}

TEST(Ops6kImport, RecordsBecomeTasksWithStableIds) {
  TempDir dir;
  fs::path records = write_records(
      dir.path() / "ops.jsonl",
      {json{{"ops", {"relu"}}, {"data_source", "torch#1"}, {"code", task_source("torch.relu(x)")}}
           .dump(),
       json{{"ops", {"mul", "tanh", "add"}},
            {"data_source", "torch#3"},
            {"code", task_source("torch.tanh(x * 2) + 1")}}
           .dump(),
       json{{"data_source", "torch#1"}, {"code", task_source("torch.relu(x)")}}.dump(),
       json{{"data_source", "torch#1"}, {"text", "no code"}}.dump(),
       json{{"data_source", "torch#1"}, {"code", "def f(): pass"}}.dump(), "{broken", ""});
  NoRunner runner;
  auto import_into = [&](const std::string& name, ImportSummary* summary) {
    ImportOptions options;
    options.out = dir.path() / name;
    return import_ops6k(records, options, &runner, summary);
  };
  ImportSummary summary;
  ASSERT_TRUE(import_into("a", &summary).ok());
  EXPECT_EQ(summary.imported, 2);
  EXPECT_EQ(summary.skipped.size(), 4u);  // duplicate, no code, not a task, not JSON

  Suite first, second;
  ASSERT_TRUE(load_suite(dir.path() / "a", &first).ok());
  ASSERT_EQ(first.tasks.size(), 2u);
  EXPECT_EQ(first.tasks[0].level, "level1");
  EXPECT_EQ(first.tasks[1].level, "level2");
  EXPECT_EQ(first.tasks[0].id.rfind("level1/op_", 0), 0u) << first.tasks[0].id;

  ImportSummary again;
  ASSERT_TRUE(import_into("b", &again).ok());
  ASSERT_TRUE(load_suite(dir.path() / "b", &second).ok());
  ASSERT_EQ(second.tasks.size(), 2u);
  EXPECT_EQ(first.tasks[0].id, second.tasks[0].id);
  EXPECT_EQ(first.tasks[1].id, second.tasks[1].id);
}

TEST(Ops6kImport, ARecordsOwnIdAndAnotherCodeField) {
  TempDir dir;
  fs::path records =
      write_records(dir.path() / "ops.jsonl",
                    {json{{"task_id", "fused/42"}, {"python", task_source("x + 1")}}.dump()});
  NoRunner runner;
  ImportOptions options;
  options.out = dir.path() / "out";
  options.code_field = "python";
  ImportSummary summary;
  ASSERT_TRUE(import_ops6k(records, options, &runner, &summary).ok());
  Suite suite;
  ASSERT_TRUE(load_suite(options.out, &suite).ok());
  ASSERT_EQ(suite.tasks.size(), 1u);
  EXPECT_EQ(suite.tasks[0].id, "fused_42");  // no operator count: no level
}

TEST(Ops6kImport, NothingImportableIsAnError) {
  TempDir dir;
  fs::path records = write_records(dir.path() / "ops.jsonl", {R"({"x": 1})"});
  NoRunner runner;
  ImportOptions options;
  options.out = dir.path() / "out";
  ImportSummary summary;
  Status s = import_ops6k(records, options, &runner, &summary);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("\"code\""), std::string::npos);
  EXPECT_FALSE(import_ops6k(dir.path() / "missing.jsonl", options, &runner, &summary).ok());
}

}  // namespace
}  // namespace cuda_agent
