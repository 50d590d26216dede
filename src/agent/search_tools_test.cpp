#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "agent/tool.h"
#include "util/files.h"

namespace cuda_agent::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

/// A workspace in a temporary folder, with the search tools registered.
class SearchTools : public ::testing::Test {
 protected:
  SearchTools() : context_{WorkspacePaths(dir_.path()), {}, {}, nullptr} {
    add_search_tools(&registry_);
  }

  ToolOutput run(const std::string& name, const json& args) {
    const Tool* tool = registry_.find(name);
    if (tool == nullptr) return ToolOutput::fail("no tool " + name);
    return tool->run(args, context_);
  }

  /// Writes a file, its modification time age_s seconds in the past.
  void put(const std::string& path, const std::string& text, int age_s = 0) {
    fs::create_directories((dir_.path() / path).parent_path());
    ASSERT_TRUE(write_file_atomic(dir_.path() / path, text).ok());
    fs::last_write_time(dir_.path() / path,
                        fs::file_time_type::clock::now() - std::chrono::seconds(age_s));
  }

  /// Glob's output as a sorted list of paths (its notes left out).
  std::vector<std::string> glob(const json& args) {
    ToolOutput out = run("Glob", args);
    EXPECT_FALSE(out.error) << out.text;
    std::vector<std::string> paths;
    std::istringstream lines(out.text);
    for (std::string line; std::getline(lines, line);) {
      if (!line.empty() && line[0] != '[' && line.rfind("no files", 0) != 0) paths.push_back(line);
    }
    std::sort(paths.begin(), paths.end());
    return paths;
  }

  /// A small source tree, with files in .git and __pycache__ that must never show.
  void put_tree() {
    put("top.cu", "__global__ void top() {}\n");
    put("kernels/add.cu", "__global__ void add() {}\n");
    put("kernels/sub/mul.cu", "__global__ void mul() {}\n");
    put("kernels/sub/mul.h", "void mul();\n");
    put("src/a.cpp", "int a;\n");
    put("src/b.h", "int b;\n");
    put("src/c.py", "c = 1\n");
    put(".git/objects/x.cu", "hidden\n");
    put("__pycache__/y.cu", "hidden\n");
    put("kernels/__pycache__/z.cu", "hidden\n");
  }

  TempDir dir_;
  ToolRegistry registry_;
  ToolContext context_;
};

using Paths = std::vector<std::string>;

TEST_F(SearchTools, RegistersGlobAndGrep) {
  EXPECT_EQ(registry_.names(), (Paths{"Glob", "Grep"}));
  for (const Tool& tool : registry_.tools()) {
    EXPECT_FALSE(tool.mutates);
    EXPECT_EQ(tool.parameters["required"], json({"pattern"}));
  }
}

TEST_F(SearchTools, GlobDoubleStarSpansFoldersAndSkipsGitAndPycache) {
  put_tree();
  EXPECT_EQ(glob({{"pattern", "**/*.cu"}}),
            (Paths{"kernels/add.cu", "kernels/sub/mul.cu", "top.cu"}));
  EXPECT_EQ(glob({{"pattern", "kernels/**/*.cu"}}),
            (Paths{"kernels/add.cu", "kernels/sub/mul.cu"}));
  EXPECT_EQ(glob({{"pattern", "**/sub/**"}}), (Paths{"kernels/sub/mul.cu", "kernels/sub/mul.h"}));
}

TEST_F(SearchTools, GlobStarAndQuestionMarkStayInOneFolder) {
  put_tree();
  EXPECT_EQ(glob({{"pattern", "*.cu"}}), (Paths{"top.cu"}));
  EXPECT_EQ(glob({{"pattern", "kernels/*.cu"}}), (Paths{"kernels/add.cu"}));
  EXPECT_EQ(glob({{"pattern", "*/*.cu"}}), (Paths{"kernels/add.cu"}));
  EXPECT_EQ(glob({{"pattern", "src/?.h"}}), (Paths{"src/b.h"}));
  EXPECT_EQ(glob({{"pattern", "src/[ab].*"}}), (Paths{"src/a.cpp", "src/b.h"}));
  EXPECT_EQ(glob({{"pattern", "./src/a.cpp"}}), (Paths{"src/a.cpp"}));
}

TEST_F(SearchTools, GlobBracesGiveAlternatives) {
  put_tree();
  EXPECT_EQ(glob({{"pattern", "src/*.{cpp,h}"}}), (Paths{"src/a.cpp", "src/b.h"}));
  EXPECT_EQ(glob({{"pattern", "{kernels,src}/*.{cu,py}"}}), (Paths{"kernels/add.cu", "src/c.py"}));
  EXPECT_EQ(glob({{"pattern", "**/*.{h,{cpp,py}}"}}),
            (Paths{"kernels/sub/mul.h", "src/a.cpp", "src/b.h", "src/c.py"}));
}

TEST_F(SearchTools, GlobInAFolderListsPathsFromTheWorkspaceNewestFirst) {
  put("kernels/old.cu", "", 300);
  put("kernels/new.cu", "", 10);
  put("kernels/mid.cu", "", 100);
  put("other.cu", "");
  ToolOutput out = run("Glob", {{"pattern", "*.cu"}, {"path", "kernels"}});
  EXPECT_EQ(out.text, "kernels/new.cu\nkernels/mid.cu\nkernels/old.cu\n");
  out =
      run("Glob", {{"pattern", (dir_.path() / "kernels" / "*.cu").string()}, {"path", "kernels"}});
  EXPECT_EQ(out.text, "kernels/new.cu\nkernels/mid.cu\nkernels/old.cu\n");
}

TEST_F(SearchTools, GlobSaysWhenNothingMatches) {
  put_tree();
  ToolOutput out = run("Glob", {{"pattern", "**/*.rs"}});
  EXPECT_FALSE(out.error);
  EXPECT_EQ(out.text, "no files match \"**/*.rs\" in .");
}

TEST_F(SearchTools, GlobCapsAtOneHundredNewest) {
  for (int i = 0; i < 150; ++i) put("gen/f" + std::to_string(i) + ".txt", "", 1000 - i);
  ToolOutput out = run("Glob", {{"pattern", "gen/*.txt"}});
  EXPECT_EQ(std::count(out.text.begin(), out.text.end(), '\n'), 101);
  EXPECT_EQ(out.text.rfind("gen/f149.txt\ngen/f148.txt\n", 0), 0u);
  EXPECT_EQ(out.text.find("gen/f49.txt\n"), std::string::npos);
  EXPECT_NE(out.text.find("[showing the 100 newest of 150 files; narrow the pattern or path"),
            std::string::npos);
}

TEST_F(SearchTools, GlobStaysInsideTheWorkspace) {
  TempDir outside;
  ASSERT_TRUE(write_file_atomic(outside.path() / "secret.cu", "x\n").ok());
  put("inside.cu", "x\n");
  fs::create_symlink(outside.path() / "secret.cu", dir_.path() / "link.cu");
  fs::create_symlink(dir_.path() / "inside.cu", dir_.path() / "alias.cu");
  fs::create_symlink(outside.path(), dir_.path() / "outdir");
  EXPECT_EQ(glob({{"pattern", "**/*.cu"}}), (Paths{"alias.cu", "inside.cu"}));
  ToolOutput out = run("Glob", {{"pattern", "*"}, {"path", outside.path().string()}});
  EXPECT_TRUE(out.error);
  EXPECT_NE(out.text.find("is outside the workspace"), std::string::npos);
  out = run("Glob", {{"pattern", "*"}, {"path", "missing"}});
  EXPECT_TRUE(out.error);
  EXPECT_EQ(out.text.rfind("path missing does not exist", 0), 0u);
  EXPECT_EQ(run("Glob", {{"pattern", 5}}).text,
            "argument \"pattern\" must be a string, not number");
}

TEST_F(SearchTools, GrepListsMatchingFilesByDefault) {
  put_tree();
  ToolOutput out = run("Grep", {{"pattern", "__global__ void (add|mul)"}});
  EXPECT_FALSE(out.error) << out.text;
  EXPECT_EQ(out.text.rfind("Found 2 files (newest first)\n", 0), 0u) << out.text;
  EXPECT_NE(out.text.find("kernels/add.cu\n"), std::string::npos);
  EXPECT_NE(out.text.find("kernels/sub/mul.cu\n"), std::string::npos);
  EXPECT_EQ(out.text.find("hidden"), std::string::npos);
  out = run("Grep", {{"pattern", "hidden"}});
  EXPECT_EQ(out.text, "no matches for /hidden/ in .\n");
}

TEST_F(SearchTools, GrepContentShowsContextWithSeparatorsLikeGrep) {
  put("a.txt", "one\nmatch two\nthree\nfour\nfive\nsix\nmatch seven\nmatch eight\nnine\n");
  put("b.txt", "x\nmatch y\n");
  ToolOutput out = run("Grep", {{"pattern", "match"}, {"output_mode", "content"}, {"-C", 1}});
  EXPECT_FALSE(out.error) << out.text;
  EXPECT_EQ(out.text,
            "a.txt-1-one\n"
            "a.txt:2:match two\n"
            "a.txt-3-three\n"
            "--\n"
            "a.txt-6-six\n"
            "a.txt:7:match seven\n"
            "a.txt:8:match eight\n"
            "a.txt-9-nine\n"
            "--\n"
            "b.txt-1-x\n"
            "b.txt:2:match y\n");
  // Groups that touch are not separated; -A and -B apart.
  out = run(
      "Grep",
      {{"pattern", "match"}, {"path", "a.txt"}, {"output_mode", "content"}, {"-A", 2}, {"-B", 0}});
  EXPECT_EQ(out.text,
            "a.txt:2:match two\na.txt-3-three\na.txt-4-four\n--\n"
            "a.txt:7:match seven\na.txt:8:match eight\na.txt-9-nine\n");
  out = run("Grep", {{"pattern", "seven"}, {"output_mode", "content"}, {"-n", false}});
  EXPECT_EQ(out.text, "a.txt:match seven\n");
}

TEST_F(SearchTools, GrepCountsMatchingLinesPerFile) {
  put("a.txt", "x\nx x\ny\nx\n");
  put("b.txt", "x\n");
  put("c.txt", "y\n");
  ToolOutput out = run("Grep", {{"pattern", "x"}, {"output_mode", "count"}});
  EXPECT_EQ(out.text, "a.txt:3\nb.txt:1\n4 matching lines in 2 files\n");
}

TEST_F(SearchTools, GrepIgnoresCaseWhenAsked) {
  put("a.cu", "__Global__ void K() {}\n");
  EXPECT_EQ(run("Grep", {{"pattern", "__global__"}}).text.rfind("no matches", 0), 0u);
  EXPECT_EQ(run("Grep", {{"pattern", "__global__"}, {"-i", true}, {"output_mode", "content"}}).text,
            "a.cu:1:__Global__ void K() {}\n");
}

TEST_F(SearchTools, GrepInvalidRegexIsAClearError) {
  put("a.txt", "x\n");
  ToolOutput out = run("Grep", {{"pattern", "foo("}});
  EXPECT_TRUE(out.error);
  EXPECT_EQ(out.text.rfind("invalid regular expression \"foo(\": ", 0), 0u) << out.text;
  EXPECT_NE(out.text.find("escape ( ) [ ]"), std::string::npos);
  out = run("Grep", {{"pattern", "x"}, {"output_mode", "lines"}});
  EXPECT_TRUE(out.error);
  EXPECT_EQ(out.text.rfind("output_mode must be", 0), 0u);
}

TEST_F(SearchTools, GrepGlobFiltersFiles) {
  put_tree();
  EXPECT_EQ(run("Grep", {{"pattern", "void"}, {"glob", "*.h"}, {"output_mode", "count"}}).text,
            "kernels/sub/mul.h:1\n1 matching line in 1 file\n");
  EXPECT_EQ(
      run("Grep", {{"pattern", "\\w"}, {"glob", "*.{cpp,py}"}, {"output_mode", "count"}}).text,
      "src/a.cpp:1\nsrc/c.py:1\n2 matching lines in 2 files\n");
  // A glob with a folder in it matches paths below the searched folder.
  EXPECT_EQ(
      run("Grep", {{"pattern", "void"}, {"glob", "kernels/**/*.cu"}, {"output_mode", "count"}})
          .text,
      "kernels/add.cu:1\nkernels/sub/mul.cu:1\n2 matching lines in 2 files\n");
}

TEST_F(SearchTools, GrepSearchesOneFileWhenPathIsAFile) {
  put_tree();
  EXPECT_EQ(
      run("Grep", {{"pattern", "void"}, {"path", "kernels/add.cu"}, {"output_mode", "content"}})
          .text,
      "kernels/add.cu:1:__global__ void add() {}\n");
  ToolOutput out = run("Grep", {{"pattern", "x"}, {"path", "../"}});
  EXPECT_TRUE(out.error);
  EXPECT_NE(out.text.find("is outside the workspace"), std::string::npos);
}

TEST_F(SearchTools, GrepSkipsBinaryFilesAndLinksOutside) {
  put("bin.dat", std::string("needle\0\x01", 8));
  put("text.txt", "needle\n");
  TempDir outside;
  ASSERT_TRUE(write_file_atomic(outside.path() / "secret.txt", "needle\n").ok());
  fs::create_symlink(outside.path() / "secret.txt", dir_.path() / "leak.txt");
  EXPECT_EQ(run("Grep", {{"pattern", "needle"}, {"output_mode", "count"}}).text,
            "text.txt:1\n1 matching line in 1 file\n");
}

TEST_F(SearchTools, GrepCutsLongLinesBetweenUtf8Characters) {
  std::string euros;
  for (int i = 0; i < 400; ++i) euros += "\u20ac";  // 1200 bytes; the cut at 500 falls inside one
  put("euro.txt", "needle " + euros + "\n");
  std::string text = run("Grep", {{"pattern", "needle"}, {"output_mode", "content"}}).text;
  EXPECT_NO_THROW(json(text).dump());
  EXPECT_NE(
      text.find("euro.txt:1:needle " + euros.substr(0, 492) + " [... 1207 characters in all]"),
      std::string::npos)
      << text;
}

TEST_F(SearchTools, GrepHeadLimitAndLongLines) {
  std::string text;
  for (int i = 0; i < 50; ++i) text += "hit " + std::to_string(i) + "\n";
  put("many.txt", text + std::string(5000, 'a') + "hit\n");
  ToolOutput out =
      run("Grep", {{"pattern", "(h|i)+t"}, {"output_mode", "content"}, {"head_limit", 3}});
  EXPECT_EQ(out.text,
            "many.txt:1:hit 0\nmany.txt:2:hit 1\nmany.txt:3:hit 2\n"
            "[showing the first 3 of 50 lines; raise head_limit or narrow the search to see more]\n"
            "[1 line longer than 3000 characters was not searched; Read with offset to see it]\n");
}

}  // namespace
}  // namespace cuda_agent::agent
