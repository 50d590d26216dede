#include "agent/recorder.h"

#include <gtest/gtest.h>

#include "agent/trajectory.h"
#include "util/files.h"

namespace cuda_agent::agent {
namespace {

using nlohmann::json;

TEST(EpisodeRecorder, ActionsGoThroughTheToolsAndReadAsAConversation) {
  TempDir dir;
  ToolContext context{WorkspacePaths(dir.path()), {}, {}, nullptr};
  EpisodeRecorder recorder(&context, "system", "task");
  recorder.turn("plan: one kernel");
  EXPECT_FALSE(
      recorder.call("Write", {{"file_path", "kernels/k.cpp"}, {"content", "int x;\n"}}).error);
  EXPECT_FALSE(
      recorder.call("Write", {{"file_path", "model_new.py"}, {"content", "CONFIG = 1 "}}).error);
  recorder.turn("tune");
  EXPECT_FALSE(recorder
                   .call("Edit", {{"file_path", "model_new.py"},
                                  {"old_string", "CONFIG = 1 "},
                                  {"new_string", "CONFIG = 2 "}})
                   .error);
  // A refused action is recorded as what it was.
  EXPECT_TRUE(recorder.call("Write", {{"file_path", "model.py"}, {"content", "x"}}).error);
  Episode e = recorder.finish("done: pass");

  std::string text;
  ASSERT_TRUE(read_file(dir.path() / "model_new.py", &text).ok());
  EXPECT_EQ(text, "CONFIG = 2 ");
  EXPECT_EQ(e.ending, Ending::kFinished);
  ASSERT_EQ(e.turns.size(), 3u);
  EXPECT_EQ(e.turns[0].tools.size(), 2u);
  EXPECT_TRUE(e.turns[1].tools[1].error);
  // system, user, (assistant + 2 tools), (assistant + 2 tools), assistant
  ASSERT_EQ(e.messages.size(), 9u);
  EXPECT_EQ(e.messages[2].content, "plan: one kernel");
  EXPECT_EQ(e.messages[2].tool_calls[1].name, "Write");
  EXPECT_EQ(e.messages[4].tool_call_id, e.messages[2].tool_calls[1].id);
  EXPECT_EQ(json::parse(e.messages[5].tool_calls[0].arguments)["new_string"], "CONFIG = 2 ");
  EXPECT_EQ(e.messages[8].content, "done: pass");
  EpisodeInfo info;
  info.policy = "synth";
  json r = trajectory_record(e, info);
  EXPECT_EQ(r["turns"][1]["tool_calls"][0]["name"], "Edit");
  EXPECT_EQ(r["policy"], "synth");
}

}  // namespace
}  // namespace cuda_agent::agent
