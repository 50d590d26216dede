#include "workspace/workspace.h"

#include <gtest/gtest.h>

#include "util/files.h"
#include "util/paths.h"

namespace cuda_agent {
namespace {

namespace fs = std::filesystem;

class WorkspaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Store::Open(dir_.path() / "store.sqlite", &store_).ok());
    task_.path = dir_.path() / "task.py";
    task_.id = "task";
    task_.source =
        "class Model:\n    pass\ndef get_inputs():\n    return []\n"
        "def get_init_inputs():\n    return []\n";
    task_.sha256 = "unused-by-these-tests";
    options_.template_dir = harness_dir() / "workspace";
    options_.binary = "/usr/bin/cuda-agent";
    ws_ = dir_.path() / "ws";
    ASSERT_TRUE(init_workspace(task_, ws_, options_, store_.get(), &record_).ok());
  }

  TempDir dir_;
  std::unique_ptr<Store> store_;
  Task task_;
  InitOptions options_;
  fs::path ws_;
  WorkspaceRecord record_;
};

TEST_F(WorkspaceTest, LaysOutTheReleaseLayout) {
  for (const char* f :
       {"SKILL.md", "model.py", "model_new.py", "utils/kernels.py", "utils/compile.py",
        "utils/verify.py", "utils/profile.py", ".cuda-agent/workspace.json"}) {
    EXPECT_TRUE(fs::is_regular_file(ws_ / f)) << f;
  }
  EXPECT_TRUE(fs::is_directory(ws_ / "kernels"));
  auto perms = fs::status(ws_ / "utils/kernels.py").permissions();
  EXPECT_EQ(perms & fs::perms::owner_write, fs::perms::none);
  EXPECT_NE(fs::status(ws_ / "model_new.py").permissions() & fs::perms::owner_write,
            fs::perms::none);
}

TEST_F(WorkspaceTest, UntouchedWorkspaceVerifies) {
  WorkspaceRecord record;
  Status s = verify_workspace(ws_, store_.get(), &record);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(record.task_source, task_.source);
}

TEST_F(WorkspaceTest, ModifiedInfrastructureIsCaught) {
  fs::permissions(ws_ / "utils/kernels.py", fs::perms::owner_write, fs::perm_options::add);
  ASSERT_TRUE(write_file_atomic(ws_ / "utils/kernels.py", "# patched\n").ok());
  WorkspaceRecord record;
  Status s = verify_workspace(ws_, store_.get(), &record);
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_NE(s.message().find("utils/kernels.py was modified"), std::string::npos);
}

TEST_F(WorkspaceTest, ModifiedReferenceIsCaught) {
  fs::permissions(ws_ / "model.py", fs::perms::owner_write, fs::perm_options::add);
  ASSERT_TRUE(write_file_atomic(ws_ / "model.py", task_.source + "# easier\n").ok());
  WorkspaceRecord record;
  EXPECT_EQ(verify_workspace(ws_, store_.get(), &record).code(), Status::Code::kCorruption);
}

TEST_F(WorkspaceTest, FileAddedToUtilsIsCaught) {
  ASSERT_TRUE(write_file_atomic(ws_ / "utils/torch.py", "# shadow\n").ok());
  WorkspaceRecord record;
  Status s = verify_workspace(ws_, store_.get(), &record);
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_NE(s.message().find("utils/torch.py"), std::string::npos);
}

TEST_F(WorkspaceTest, CandidateFilesMayChange) {
  ASSERT_TRUE(write_file_atomic(ws_ / "model_new.py", "# mine\n").ok());
  ASSERT_TRUE(write_file_atomic(ws_ / "kernels/a.cpp", "// mine\n").ok());
  WorkspaceRecord record;
  EXPECT_TRUE(verify_workspace(ws_, store_.get(), &record).ok());
}

TEST_F(WorkspaceTest, NonEmptyFolderIsRefused) {
  WorkspaceRecord record;
  Status s = init_workspace(task_, ws_, options_, store_.get(), &record);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("not empty"), std::string::npos);
}

}  // namespace
}  // namespace cuda_agent
