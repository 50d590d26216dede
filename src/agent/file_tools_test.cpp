#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "agent/tool.h"
#include "util/files.h"

namespace cuda_agent::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

/// A workspace in a temporary folder, with the file tools registered.
class FileTools : public ::testing::Test {
 protected:
  FileTools() : context_{WorkspacePaths(dir_.path()), {}, {}, nullptr} {
    add_file_tools(&registry_);
  }

  ToolOutput run(const std::string& name, const json& args) {
    const Tool* tool = registry_.find(name);
    if (tool == nullptr) return ToolOutput::fail("no tool " + name);
    return tool->run(args, context_);
  }

  void put(const std::string& path, const std::string& text) {
    fs::create_directories((dir_.path() / path).parent_path());
    ASSERT_TRUE(write_file_atomic(dir_.path() / path, text).ok());
  }

  std::string get(const std::string& path) {
    std::string text;
    EXPECT_TRUE(read_file(dir_.path() / path, &text).ok()) << path;
    return text;
  }

  static std::string read_back(const fs::path& path) {
    std::string text;
    EXPECT_TRUE(read_file(path, &text).ok()) << path;
    return text;
  }

  static std::string lines(int n) {
    std::string text;
    for (int i = 1; i <= n; ++i) text += "line " + std::to_string(i) + "\n";
    return text;
  }

  TempDir dir_;
  ToolRegistry registry_;
  ToolContext context_;
};

TEST_F(FileTools, RegistersFiveToolsWithSchemas) {
  EXPECT_EQ(registry_.names(),
            (std::vector<std::string>{"Read", "Write", "Edit", "MultiEdit", "NotebookEdit"}));
  for (const Tool& tool : registry_.tools()) {
    EXPECT_EQ(tool.parameters["type"], "object") << tool.name;
    EXPECT_FALSE(tool.description.empty()) << tool.name;
    EXPECT_EQ(tool.mutates, tool.name != "Read") << tool.name;
    for (const auto& [key, property] : tool.parameters["properties"].items()) {
      EXPECT_TRUE(property.contains("description")) << tool.name << "." << key;
    }
  }
}

TEST_F(FileTools, ReadNumbersLinesLikeCatN) {
  put("a.py", "import torch\n\tx = 1\n");
  ToolOutput out = run("Read", {{"file_path", "a.py"}});
  EXPECT_FALSE(out.error);
  EXPECT_EQ(out.text, "     1\timport torch\n     2\t\tx = 1\n");
}

TEST_F(FileTools, ReadOffsetAndLimitSayWhereToGoOn) {
  put("a.txt", lines(10));
  ToolOutput out = run("Read", {{"file_path", "a.txt"}, {"offset", 3}, {"limit", 2}});
  EXPECT_EQ(out.text,
            "     3\tline 3\n     4\tline 4\n[lines 3-4 of 10; pass offset=5 to read on]\n");
  out = run("Read", {{"file_path", "a.txt"}, {"offset", 9}});
  EXPECT_EQ(out.text, "     9\tline 9\n    10\tline 10\n");
}

TEST_F(FileTools, ReadStopsAt2000LinesByDefault) {
  put("big.txt", lines(2500));
  ToolOutput out = run("Read", {{"file_path", "big.txt"}});
  EXPECT_NE(out.text.find("  2000\tline 2000\n"), std::string::npos);
  EXPECT_EQ(out.text.find("line 2001"), std::string::npos);
  EXPECT_NE(out.text.find("[lines 1-2000 of 2500; pass offset=2001 to read on]"),
            std::string::npos);
}

TEST_F(FileTools, ReadOffsetPastTheEndIsAnError) {
  put("a.txt", lines(3));
  ToolOutput out = run("Read", {{"file_path", "a.txt"}, {"offset", 4}});
  EXPECT_TRUE(out.error);
  EXPECT_EQ(out.text,
            "offset 4 is past the end of a.txt, which has 3 lines; pass an offset from 1 to 3");
}

TEST_F(FileTools, ReadCutsVeryLongLines) {
  put("wide.txt", std::string(3000, 'x') + "\nshort\n");
  ToolOutput out = run("Read", {{"file_path", "wide.txt"}});
  EXPECT_NE(out.text.find("\t" + std::string(2000, 'x') + " [... line cut: 3000 characters"),
            std::string::npos);
  EXPECT_EQ(out.text.find(std::string(2001, 'x')), std::string::npos);
  EXPECT_NE(out.text.find("     2\tshort\n"), std::string::npos);
}

TEST_F(FileTools, ReadCutsLongLinesBetweenUtf8Characters) {
  std::string euros;
  for (int i = 0; i < 1000; ++i) euros += "\u20ac";  // 3 bytes each: 2000 falls inside one
  put("euro.txt", euros + "\n");
  std::string text = run("Read", {{"file_path", "euro.txt"}}).text;
  EXPECT_NO_THROW(json(text).dump());
  EXPECT_NE(text.find("\t" + euros.substr(0, 1998) + " [... line cut: 3000 characters"),
            std::string::npos);
}

TEST_F(FileTools, ReadEmptyMissingBinaryAndFolder) {
  put("empty.txt", "");
  EXPECT_EQ(run("Read", {{"file_path", "empty.txt"}}).text, "empty.txt is empty (0 lines)");
  ToolOutput missing = run("Read", {{"file_path", "nope.py"}});
  EXPECT_TRUE(missing.error);
  EXPECT_EQ(missing.text.rfind("nope.py does not exist", 0), 0u);
  put("blob.bin", std::string("ab\0cd", 5));
  ToolOutput binary = run("Read", {{"file_path", "blob.bin"}});
  EXPECT_TRUE(binary.error);
  EXPECT_NE(binary.text.find("binary file"), std::string::npos);
  put("kernels/add.cu", "x");
  ToolOutput folder = run("Read", {{"file_path", "kernels"}});
  EXPECT_TRUE(folder.error);
  EXPECT_EQ(folder.text.rfind("kernels is a folder", 0), 0u);
}

TEST_F(FileTools, ReadMayReadInfrastructureButNothingOutside) {
  put("model.py", "class Model: pass\n");
  EXPECT_EQ(run("Read", {{"file_path", "model.py"}}).text, "     1\tclass Model: pass\n");
  TempDir outside;
  ASSERT_TRUE(write_file_atomic(outside.path() / "secret", "s\n").ok());
  ToolOutput out = run("Read", {{"file_path", (outside.path() / "secret").string()}});
  EXPECT_TRUE(out.error);
  EXPECT_NE(out.text.find("is outside the workspace"), std::string::npos);
}

TEST_F(FileTools, WrongArgumentsAreClearErrors) {
  put("a.txt", "x\n");
  EXPECT_EQ(run("Read", json::object()).text, "missing required argument \"file_path\"");
  EXPECT_EQ(run("Read", {{"file_path", 3}}).text,
            "argument \"file_path\" must be a string, not number");
  EXPECT_EQ(run("Read", {{"file_path", "a.txt"}, {"offset", "ten"}}).text,
            "argument \"offset\" must be an integer, not \"ten\"");
  EXPECT_EQ(run("Read", {{"file_path", "a.txt"}, {"limit", 0}}).text,
            "argument \"limit\" must be at least 1, not 0");
  EXPECT_EQ(run("Write", {{"file_path", "a.txt"}}).text, "missing required argument \"content\"");
  EXPECT_EQ(run("Edit", {{"file_path", "a.txt"},
                         {"old_string", "x"},
                         {"new_string", "y"},
                         {"replace_all", "yes"}})
                .text,
            "argument \"replace_all\" must be true or false, not \"yes\"");
  // A quoted number, as text tool calls send it, is taken.
  EXPECT_FALSE(run("Read", {{"file_path", "a.txt"}, {"offset", "1"}}).error);
  EXPECT_EQ(get("a.txt"), "x\n");
}

TEST_F(FileTools, WriteCreatesFoldersAndFile) {
  ToolOutput out = run("Write", {{"file_path", "kernels/sub/add.cu"}, {"content", "a\nb\n"}});
  EXPECT_FALSE(out.error) << out.text;
  EXPECT_EQ(out.text, "wrote 2 lines to kernels/sub/add.cu (created it)");
  EXPECT_EQ(get("kernels/sub/add.cu"), "a\nb\n");
}

TEST_F(FileTools, WriteOverwrites) {
  put("model_new.py", "old\n");
  ToolOutput out = run("Write", {{"file_path", "model_new.py"}, {"content", "new\nfile"}});
  EXPECT_EQ(out.text, "wrote 2 lines to model_new.py (overwrote it)");
  EXPECT_EQ(get("model_new.py"), "new\nfile");
  // Nothing but the file is left behind (no temporary file).
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_.path()), fs::directory_iterator()), 1);
}

TEST_F(FileTools, WriteRefusesPathsOutsideTheWorkspace) {
  TempDir outside;
  fs::create_symlink(outside.path(), dir_.path() / "link");
  fs::path escape = dir_.path().parent_path() / "escape.txt";
  for (const std::string& path : {(outside.path() / "x.txt").string(), std::string("../escape.txt"),
                                  std::string("link/x.txt"), std::string("kernels/../../y.txt")}) {
    ToolOutput out = run("Write", {{"file_path", path}, {"content", "pwned"}});
    EXPECT_TRUE(out.error) << path;
    EXPECT_EQ(out.text.rfind("path " + path + " is outside the workspace", 0), 0u) << out.text;
  }
  // A linked file whose target is outside is refused, whether the target exists yet or not.
  ASSERT_TRUE(write_file_atomic(outside.path() / "target.txt", "kept\n").ok());
  fs::create_symlink(outside.path() / "target.txt", dir_.path() / "file_link.txt");
  ToolOutput out = run("Write", {{"file_path", "file_link.txt"}, {"content", "pwned"}});
  EXPECT_EQ(out.text.rfind("path file_link.txt is outside the workspace", 0), 0u) << out.text;
  out = run("Edit",
            {{"file_path", "file_link.txt"}, {"old_string", "kept"}, {"new_string", "pwned"}});
  EXPECT_TRUE(out.error);
  fs::create_symlink(outside.path() / "new.txt", dir_.path() / "dangling.txt");
  out = run("Write", {{"file_path", "dangling.txt"}, {"content", "pwned"}});
  EXPECT_EQ(out.text.rfind("path dangling.txt is outside the workspace", 0), 0u) << out.text;
  EXPECT_FALSE(fs::exists(outside.path() / "new.txt"));
  EXPECT_TRUE(fs::is_symlink(dir_.path() / "dangling.txt"));
  EXPECT_EQ(read_back(outside.path() / "target.txt"), "kept\n");
  EXPECT_FALSE(fs::exists(outside.path() / "x.txt"));
  EXPECT_FALSE(fs::exists(escape));
  EXPECT_FALSE(fs::exists(dir_.path().parent_path() / "y.txt"));
}

TEST_F(FileTools, WriteRefusesReadOnlyInfrastructure) {
  put("model.py", "original\n");
  for (const std::string& path :
       {"model.py", "utils/x.py", "SKILL.md", ".cuda-agent/state.json", "./utils/../model.py"}) {
    ToolOutput out = run("Write", {{"file_path", path}, {"content", "changed"}});
    EXPECT_TRUE(out.error) << path;
    EXPECT_NE(out.text.find(" is read-only infrastructure"), std::string::npos) << out.text;
  }
  EXPECT_EQ(get("model.py"), "original\n");
  EXPECT_FALSE(fs::exists(dir_.path() / "utils"));
  EXPECT_FALSE(fs::exists(dir_.path() / "SKILL.md"));
  EXPECT_FALSE(fs::exists(dir_.path() / ".cuda-agent"));
}

TEST_F(FileTools, EditReplacesUniqueTextAndShowsTheLines) {
  put("a.py", "def f():\n    return 1\n\nprint(f())\n");
  ToolOutput out = run("Edit", {{"file_path", "a.py"},
                                {"old_string", "    return 1"},
                                {"new_string", "    y = 2\n    return y"}});
  EXPECT_FALSE(out.error) << out.text;
  EXPECT_EQ(get("a.py"), "def f():\n    y = 2\n    return y\n\nprint(f())\n");
  EXPECT_EQ(out.text,
            "replaced 1 occurrence in a.py; lines around the edit now read:\n"
            "     1\tdef f():\n     2\t    y = 2\n     3\t    return y\n     4\t\n"
            "     5\tprint(f())\n");
}

TEST_F(FileTools, EditNotFoundLeavesTheFile) {
  put("a.py", "x = 1\n");
  ToolOutput out = run("Edit", {{"file_path", "a.py"}, {"old_string", "x=1"}, {"new_string", "x"}});
  EXPECT_TRUE(out.error);
  EXPECT_EQ(out.text,
            "old_string was not found in a.py; Read the file and copy the text exactly, including "
            "whitespace");
  out = run("Edit", {{"file_path", "a.py"}, {"old_string", "     1\tx = 1"}, {"new_string", "y"}});
  EXPECT_NE(out.text.find("leave out the line numbers"), std::string::npos);
  EXPECT_EQ(get("a.py"), "x = 1\n");
}

TEST_F(FileTools, EditNotUniqueSaysHowOftenAndWhere) {
  put("a.py", "x = 0\nx = 0\ny = 1\nx = 0\n");
  ToolOutput out =
      run("Edit", {{"file_path", "a.py"}, {"old_string", "x = 0"}, {"new_string", "x = 5"}});
  EXPECT_TRUE(out.error);
  EXPECT_EQ(out.text,
            "old_string occurs 3 times in a.py (at lines 1, 2, 4); include more of the surrounding "
            "text to make it unique, or pass replace_all=true to replace every occurrence");
  EXPECT_EQ(get("a.py"), "x = 0\nx = 0\ny = 1\nx = 0\n");
  out = run("Edit", {{"file_path", "a.py"},
                     {"old_string", "x = 0"},
                     {"new_string", "x = 5"},
                     {"replace_all", true}});
  EXPECT_FALSE(out.error) << out.text;
  EXPECT_EQ(out.text.rfind("replaced 3 occurrences in a.py; around the first (line 1):\n", 0), 0u);
  EXPECT_EQ(get("a.py"), "x = 5\nx = 5\ny = 1\nx = 5\n");
}

TEST_F(FileTools, EditEmptyOrIdenticalStringsAreErrors) {
  put("a.py", "x = 1\n");
  ToolOutput empty = run("Edit", {{"file_path", "a.py"}, {"old_string", ""}, {"new_string", "y"}});
  EXPECT_TRUE(empty.error);
  EXPECT_EQ(empty.text.rfind("old_string is empty", 0), 0u);
  ToolOutput same =
      run("Edit", {{"file_path", "a.py"}, {"old_string", "x = 1"}, {"new_string", "x = 1"}});
  EXPECT_TRUE(same.error);
  EXPECT_EQ(same.text, "old_string and new_string are the same, so the edit would change nothing");
  ToolOutput missing =
      run("Edit", {{"file_path", "b.py"}, {"old_string", "x"}, {"new_string", "y"}});
  EXPECT_TRUE(missing.error);
  EXPECT_EQ(missing.text.rfind("b.py does not exist", 0), 0u);
  EXPECT_EQ(get("a.py"), "x = 1\n");
}

TEST_F(FileTools, EditRefusesInfrastructureAndKeepsPermissions) {
  put("utils/x.py", "a = 1\n");
  ToolOutput out =
      run("Edit", {{"file_path", "utils/x.py"}, {"old_string", "a = 1"}, {"new_string", "a = 2"}});
  EXPECT_TRUE(out.error);
  EXPECT_EQ(get("utils/x.py"), "a = 1\n");
  put("run.sh", "echo hi\n");
  fs::permissions(dir_.path() / "run.sh", fs::perms::owner_all);
  out = run("Edit", {{"file_path", "run.sh"}, {"old_string", "hi"}, {"new_string", "there"}});
  EXPECT_FALSE(out.error) << out.text;
  EXPECT_EQ(get("run.sh"), "echo there\n");
  EXPECT_EQ(fs::status(dir_.path() / "run.sh").permissions(), fs::perms::owner_all);
}

TEST_F(FileTools, MultiEditAppliesEditsInOrder) {
  put("a.py", "a = 1\nb = 2\n");
  ToolOutput out =
      run("MultiEdit", {{"file_path", "a.py"},
                        {"edits",
                         {{{"old_string", "a = 1"}, {"new_string", "a = 10"}},
                          {{"old_string", "a = 10\nb"}, {"new_string", "c"}},
                          {{"old_string", "c"}, {"new_string", "d"}, {"replace_all", true}}}}});
  EXPECT_FALSE(out.error) << out.text;
  EXPECT_EQ(get("a.py"), "d = 2\n");
  EXPECT_EQ(out.text, "applied 3 edits (3 replacements) to a.py; it now has 1 line");
  // The list as a JSON string, as text tool calls send it.
  out = run("MultiEdit",
            {{"file_path", "a.py"}, {"edits", R"([{"old_string": "d", "new_string": "e"}])"}});
  EXPECT_FALSE(out.error) << out.text;
  EXPECT_EQ(get("a.py"), "e = 2\n");
}

TEST_F(FileTools, MultiEditIsAllOrNothing) {
  put("a.py", "a = 1\nb = 2\n");
  ToolOutput out = run("MultiEdit", {{"file_path", "a.py"},
                                     {"edits",
                                      {{{"old_string", "a = 1"}, {"new_string", "a = 3"}},
                                       {{"old_string", "zzz"}, {"new_string", "y"}}}}});
  EXPECT_TRUE(out.error);
  EXPECT_EQ(out.text,
            "edit 2 of 2 failed: old_string was not found in a.py; Read the file and copy the text "
            "exactly, including whitespace; nothing was written (the edits apply all or none)");
  EXPECT_EQ(get("a.py"), "a = 1\nb = 2\n");
  out = run("MultiEdit", {{"file_path", "a.py"}, {"edits", {{{"old_string", "a"}}}}});
  EXPECT_EQ(out.text.rfind("edit 1 of 1 failed: missing required argument \"new_string\"", 0), 0u);
  out = run("MultiEdit", {{"file_path", "a.py"}, {"edits", json::array()}});
  EXPECT_TRUE(out.error);
  EXPECT_EQ(get("a.py"), "a = 1\nb = 2\n");
}

/// A notebook of nbformat 4.5: a code cell with an output, then a markdown cell.
const char* kNotebook = R"nb({
 "cells": [
  {"cell_type": "code", "execution_count": 3, "id": "c0", "metadata": {},
   "outputs": [{"name": "stdout", "output_type": "stream", "text": ["1\n"]}],
   "source": ["print(1)"]
},
  {"cell_type": "markdown", "id": "m1", "metadata": {}, "source": ["# Title"]}
 ],
 "metadata": {}, "nbformat": 4, "nbformat_minor": 5
})nb";

TEST_F(FileTools, NotebookEditReplacesACodeCellAndClearsItsOutputs) {
  put("nb.ipynb", kNotebook);
  ToolOutput out =
      run("NotebookEdit",
          {{"notebook_path", "nb.ipynb"}, {"cell_number", 0}, {"new_source", "x = 1\ny = 2\n"}});
  EXPECT_FALSE(out.error) << out.text;
  EXPECT_EQ(out.text, "replaced cell 0 (code) of nb.ipynb");
  json nb = json::parse(get("nb.ipynb"));
  ASSERT_EQ(nb["cells"].size(), 2u);
  EXPECT_EQ(nb["cells"][0]["source"], json({"x = 1\n", "y = 2\n"}));
  EXPECT_EQ(nb["cells"][0]["outputs"], json::array());
  EXPECT_TRUE(nb["cells"][0]["execution_count"].is_null());
  EXPECT_EQ(nb["cells"][0]["id"], "c0");
  EXPECT_EQ(nb["cells"][1]["source"], json({"# Title"}));
  // By id, and a change of type.
  out = run("NotebookEdit", {{"notebook_path", "nb.ipynb"},
                             {"cell_id", "m1"},
                             {"new_source", "a\nb"},
                             {"cell_type", "code"}});
  EXPECT_FALSE(out.error) << out.text;
  nb = json::parse(get("nb.ipynb"));
  EXPECT_EQ(nb["cells"][1]["cell_type"], "code");
  EXPECT_EQ(nb["cells"][1]["source"], json({"a\n", "b"}));
  EXPECT_EQ(nb["cells"][1]["outputs"], json::array());
}

TEST_F(FileTools, NotebookEditInsertsAndDeletes) {
  put("nb.ipynb", kNotebook);
  ToolOutput out = run("NotebookEdit", {{"notebook_path", "nb.ipynb"},
                                        {"cell_number", 0},
                                        {"new_source", "## Intro"},
                                        {"cell_type", "markdown"},
                                        {"edit_mode", "insert"}});
  EXPECT_EQ(out.text, "inserted a markdown cell at position 0 of nb.ipynb; it now has 3 cells");
  out = run("NotebookEdit", {{"notebook_path", "nb.ipynb"},
                             {"cell_number", 3},
                             {"new_source", "end()"},
                             {"cell_type", "code"},
                             {"edit_mode", "insert"}});
  EXPECT_FALSE(out.error) << out.text;
  json nb = json::parse(get("nb.ipynb"));
  ASSERT_EQ(nb["cells"].size(), 4u);
  EXPECT_EQ(nb["cells"][0]["cell_type"], "markdown");
  EXPECT_EQ(nb["cells"][0]["source"], json({"## Intro"}));
  EXPECT_FALSE(nb["cells"][0].contains("outputs"));
  EXPECT_EQ(nb["cells"][0]["id"].get<std::string>().size(), 8u);
  EXPECT_EQ(nb["cells"][1]["id"], "c0");
  EXPECT_EQ(nb["cells"][3]["source"], json({"end()"}));
  EXPECT_TRUE(nb["cells"][3]["execution_count"].is_null());
  out = run("NotebookEdit",
            {{"notebook_path", "nb.ipynb"}, {"cell_number", 1}, {"edit_mode", "delete"}});
  EXPECT_EQ(out.text, "deleted cell 1 (code) of nb.ipynb; it now has 3 cells");
  nb = json::parse(get("nb.ipynb"));
  EXPECT_EQ(nb["cells"][1]["id"], "m1");
  out = run("NotebookEdit",
            {{"notebook_path", "nb.ipynb"}, {"new_source", "x"}, {"edit_mode", "insert"}});
  EXPECT_EQ(out.text, "cell_type is needed to insert a cell: \"code\" or \"markdown\"");
}

TEST_F(FileTools, NotebookEditErrors) {
  put("nb.ipynb", kNotebook);
  ToolOutput out =
      run("NotebookEdit", {{"notebook_path", "nb.ipynb"}, {"cell_number", 2}, {"new_source", "x"}});
  EXPECT_TRUE(out.error);
  EXPECT_EQ(out.text, "cell_number 2 is out of range: nb.ipynb has 2 cells, numbered 0 to 1");
  out = run("NotebookEdit", {{"notebook_path", "nb.ipynb"},
                             {"cell_number", 3},
                             {"new_source", "x"},
                             {"cell_type", "code"},
                             {"edit_mode", "insert"}});
  EXPECT_EQ(out.text,
            "cell_number 3 is out of range: nb.ipynb has 2 cells, numbered 0 to 1; insert at 0 to "
            "2");
  out =
      run("NotebookEdit", {{"notebook_path", "nb.ipynb"}, {"cell_id", "zz"}, {"new_source", "x"}});
  EXPECT_TRUE(out.error);
  EXPECT_EQ(out.text.rfind("no cell of nb.ipynb has id \"zz\"", 0), 0u);
  EXPECT_EQ(run("NotebookEdit", {{"notebook_path", "nb.ipynb"}, {"new_source", "x"}}).text,
            "give the cell_number (0-based) or cell_id of the cell to replace");
  EXPECT_EQ(json::parse(get("nb.ipynb")), json::parse(kNotebook));
  put("bad.ipynb", "{\"not\": \"a notebook\"}");
  out = run("NotebookEdit",
            {{"notebook_path", "bad.ipynb"}, {"cell_number", 0}, {"new_source", "x"}});
  EXPECT_TRUE(out.error);
  EXPECT_EQ(out.text.rfind("bad.ipynb is not a Jupyter notebook", 0), 0u);
  put("broken.ipynb", "{\"cells\": [");
  EXPECT_TRUE(run("NotebookEdit",
                  {{"notebook_path", "broken.ipynb"}, {"cell_number", 0}, {"new_source", "x"}})
                  .error);
  out = run("NotebookEdit",
            {{"notebook_path", "gone.ipynb"}, {"cell_number", 0}, {"new_source", "x"}});
  EXPECT_EQ(out.text.rfind("gone.ipynb does not exist", 0), 0u);
  put("a.py", "x\n");
  out = run("NotebookEdit", {{"notebook_path", "a.py"}, {"cell_number", 0}, {"new_source", "x"}});
  EXPECT_EQ(out.text, "a.py is not a Jupyter notebook (.ipynb); change it with Edit");
}

}  // namespace
}  // namespace cuda_agent::agent
