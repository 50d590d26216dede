#include "agent/tool.h"

#include <gtest/gtest.h>

#include "util/files.h"
#include "util/text.h"

namespace cuda_agent::agent {
namespace {

namespace fs = std::filesystem;

TEST(WorkspacePaths, RelativeAndAbsolutePathsInsideResolve) {
  TempDir dir;
  WorkspacePaths paths(dir.path());
  fs::path out;
  std::string err;
  ASSERT_TRUE(paths.resolve("kernels/add.cu", true, &out, &err)) << err;
  EXPECT_EQ(out, paths.root() / "kernels" / "add.cu");
  ASSERT_TRUE(paths.resolve((paths.root() / "model_new.py").string(), true, &out, &err));
  EXPECT_EQ(paths.relative(out), "model_new.py");
  ASSERT_TRUE(paths.resolve("kernels/../model_new.py", true, &out, &err));
  EXPECT_EQ(out, paths.root() / "model_new.py");
}

TEST(WorkspacePaths, OutsideTheWorkspaceIsRefusedWithAMessage) {
  TempDir dir;
  fs::create_directories(dir.path() / "ws");
  WorkspacePaths paths(dir.path() / "ws");
  fs::path out;
  std::string err;
  EXPECT_FALSE(paths.resolve("/etc/passwd", false, &out, &err));
  EXPECT_NE(err.find("outside the workspace"), std::string::npos);
  EXPECT_FALSE(paths.resolve("../secret", false, &out, &err));
  // A sibling whose name starts with the workspace's is still outside.
  EXPECT_FALSE(paths.resolve((dir.path() / "ws2" / "x").string(), false, &out, &err));
  // A link inside that leads outside.
  fs::create_directory_symlink(dir.path(), dir.path() / "ws" / "up");
  EXPECT_FALSE(paths.resolve("up/ws2", false, &out, &err));
  EXPECT_FALSE(paths.resolve("", false, &out, &err));
  // A link to a file outside that does not exist yet.
  fs::create_symlink(dir.path() / "later.txt", dir.path() / "ws" / "dangling");
  EXPECT_FALSE(paths.resolve("dangling", true, &out, &err));
  EXPECT_NE(err.find("outside the workspace"), std::string::npos);
  // One that stays inside is fine.
  fs::create_symlink("kernels/new.cu", dir.path() / "ws" / "inside");
  EXPECT_TRUE(paths.resolve("inside", true, &out, &err)) << err;
  EXPECT_EQ(out, paths.root() / "kernels" / "new.cu");
}

TEST(WorkspacePaths, InfrastructureReadsButDoesNotWrite) {
  TempDir dir;
  WorkspacePaths paths(dir.path());
  fs::path out;
  std::string err;
  for (const char* p : {"model.py", "SKILL.md", "utils/kernels.py", "utils/new.py",
                        ".cuda-agent/workspace.json", "./utils"}) {
    EXPECT_TRUE(paths.resolve(p, false, &out, &err)) << p;
    EXPECT_FALSE(paths.resolve(p, true, &out, &err)) << p;
    EXPECT_NE(err.find("read-only"), std::string::npos) << err;
  }
  EXPECT_TRUE(paths.resolve("utils_mine.py", true, &out, &err));
  EXPECT_TRUE(paths.resolve("model_new.py", true, &out, &err));
}

TEST(CutForModel, KeepsHeadAndTailAndSaysHowMuchWentMissing) {
  std::string text;
  for (int i = 0; i < 1000; ++i) text += "line " + std::to_string(i) + "\n";
  std::string cut = cut_for_model(text, 200);
  EXPECT_LT(cut.size(), 300u);
  EXPECT_EQ(cut.rfind("line 0\n", 0), 0u);
  EXPECT_NE(cut.find("line 999\n"), std::string::npos);
  EXPECT_NE(cut.find("of " + std::to_string(text.size()) + " characters left out"),
            std::string::npos);
  EXPECT_EQ(cut_for_model("short", 200), "short");
  // Multi-byte characters and no line ends: the cut falls between characters.
  std::string accents;
  for (int i = 0; i < 1000; ++i) accents += "\xC3\xA9";
  std::string cut_accents = cut_for_model(accents, 101);
  EXPECT_EQ(nlohmann::json(cut_accents).dump().find("\\u"), std::string::npos);
  EXPECT_EQ(valid_utf8(cut_accents), cut_accents);
}

TEST(ToolRegistry, SpecsAreChatCompletionsFunctions) {
  ToolRegistry registry = default_tools();
  EXPECT_EQ(registry.names(),
            (std::vector<std::string>{"Bash", "BashOutput", "KillBash", "Glob", "Grep", "Read",
                                      "Write", "Edit", "MultiEdit", "NotebookEdit"}));
  for (const auto& spec : registry.specs()) {
    EXPECT_EQ(spec["type"], "function");
    EXPECT_EQ(spec["function"]["parameters"]["type"], "object");
    EXPECT_FALSE(spec["function"]["description"].get<std::string>().empty());
  }
  EXPECT_EQ(registry.find("Nope"), nullptr);
  EXPECT_TRUE(registry.find("Edit")->mutates);
  EXPECT_FALSE(registry.find("Grep")->mutates);
}

}  // namespace
}  // namespace cuda_agent::agent
