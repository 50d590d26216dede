#include "agent/loop.h"

#include <gtest/gtest.h>

#include <deque>

#include "agent/episode.h"
#include "agent/trajectory.h"
#include "util/files.h"

namespace cuda_agent::agent {
namespace {

using llm::ChatRequest;
using llm::ChatResponse;
using llm::Message;
using nlohmann::json;

/// A model that answers from a script and keeps every request it was sent.
class ScriptedModel : public llm::LlmClient {
 public:
  struct Step {
    Message reply;
    std::string finish_reason = "stop";
    Status status;
    bool overflow = false;
  };
  std::deque<Step> script;
  std::vector<ChatRequest> requests;

  Status complete(const ChatRequest& request, ChatResponse* response,
                  llm::CallInfo* info) override {
    requests.push_back(request);
    *info = llm::CallInfo{};
    info->attempts = 1;
    if (script.empty()) {
      response->message = {"assistant", "done", {}, "", ""};
      return Status::OK();
    }
    Step step = script.front();
    script.pop_front();
    info->context_overflow = step.overflow;
    if (!step.status.ok()) return step.status;
    response->message = step.reply;
    response->finish_reason = step.finish_reason;
    // About four characters a token, as a real tokenizer counts English and code.
    long long chars = 0;
    for (const Message& m : request.messages) chars += m.content.size();
    response->usage = llm::Usage{chars / 4 + 1, 10, chars / 4 + 11};
    return Status::OK();
  }
  void calls(std::vector<llm::ToolCall> calls) {
    script.push_back({{"assistant", "", std::move(calls), "", ""}, "tool_calls", Status::OK()});
  }
  void text(const std::string& text, const std::string& finish = "stop") {
    script.push_back({{"assistant", text, {}, "", ""}, finish, Status::OK()});
  }
};

/// A registry with one tool that echoes its "text" argument and one that always fails.
struct Fixture {
  TempDir dir;
  ScriptedModel model;
  ToolRegistry tools;
  ToolContext context{WorkspacePaths(dir.path()), {}, {}, nullptr};
  AgentOptions options;

  Fixture() {
    options.model = "m";
    tools.add({"Echo",
               "echoes",
               {{"type", "object"}, {"properties", {{"text", {{"type", "string"}}}}}},
               false,
               [](const json& args, ToolContext&) {
                 return ToolOutput::ok(args.value("text", std::string("")));
               }});
    tools.add({"Fail",
               "fails",
               {{"type", "object"}, {"properties", json::object()}},
               false,
               [](const json&, ToolContext&) -> ToolOutput {
                 throw std::runtime_error("disk on fire");
               }});
  }
  Episode run() {
    AgentLoop loop(options, &model, &tools, &context);
    return loop.run("system", "task");
  }
};

TEST(AgentLoop, RunsCallsAnswersThemByIdAndFinishesWhenTheModelStops) {
  Fixture f;
  f.model.calls({{"a", "Echo", R"({"text": "one"})"}, {"b", "Echo", R"({"text": "two"})"}});
  f.model.text("all done");
  Episode e = f.run();
  EXPECT_EQ(e.ending, Ending::kFinished);
  EXPECT_EQ(e.ending_detail, "all done");
  ASSERT_EQ(e.turns.size(), 2u);
  EXPECT_EQ(e.turns[0].tools[1].output, "two");
  ASSERT_EQ(f.model.requests.size(), 2u);
  const auto& sent = f.model.requests[1].messages;
  ASSERT_EQ(sent.size(), 5u);  // system, user, assistant, two tool results
  EXPECT_EQ(sent[3].tool_call_id, "a");
  EXPECT_EQ(sent[4].content, "two");
  EXPECT_EQ(f.model.requests[0].tools.size(), 2u);
  EXPECT_EQ(e.tokens.completion_tokens, 20);
}

TEST(AgentLoop, MistakesGoBackToTheModelAsToolErrors) {
  Fixture f;
  f.model.calls({{"a", "Echo", R"({"text": )"},
                 {"b", "Nope", "{}"},
                 {"c", "Echo", "[1]"},
                 {"d", "Fail", ""},
                 {"e", "Echo", R"({"text": 5})"}});
  Episode e = f.run();
  EXPECT_EQ(e.ending, Ending::kFinished);
  const auto& t = e.turns[0].tools;
  ASSERT_EQ(t.size(), 5u);
  EXPECT_NE(t[0].output.find("not valid JSON"), std::string::npos);
  EXPECT_NE(t[1].output.find("no tool named \"Nope\"; the tools are: Echo, Fail"),
            std::string::npos);
  EXPECT_NE(t[2].output.find("must be a JSON object"), std::string::npos);
  EXPECT_NE(t[3].output.find("disk on fire"), std::string::npos);  // empty arguments are {}
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(t[i].error) << i;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(t[i].output.rfind("Error: ", 0), 0u) << t[i].output;
}

TEST(AgentLoop, MissingOrRepeatedCallIdsAreMadeDistinct) {
  Fixture f;
  f.model.calls({{"", "Echo", "{}"}, {"x", "Echo", "{}"}, {"x", "Echo", "{}"}});
  Episode e = f.run();
  const auto& calls = e.messages[2].tool_calls;
  EXPECT_EQ(calls[0].id, "call_1_1");
  EXPECT_EQ(calls[1].id, "x");
  EXPECT_EQ(calls[2].id, "call_1_3");
  EXPECT_EQ(e.messages[5].tool_call_id, "call_1_3");
}

TEST(AgentLoop, CallsWrittenAsTextAreRun) {
  Fixture f;
  f.model.text("<tool_call>{\"name\": \"Echo\", \"arguments\": {\"text\": \"hi\"}}</tool_call>");
  Episode e = f.run();
  ASSERT_EQ(e.turns.size(), 2u);
  EXPECT_TRUE(e.turns[0].calls_from_text);
  EXPECT_EQ(e.turns[0].tools[0].output, "hi");
  EXPECT_EQ(e.messages[2].tool_calls.size(), 1u);
  EXPECT_EQ(e.messages[3].tool_call_id, "text-call-1");
}

TEST(AgentLoop, TheTurnLimitEndsTheEpisode) {
  Fixture f;
  f.options.max_turns = 3;
  for (int i = 0; i < 10; ++i) f.model.calls({{"a", "Echo", json({{"text", i}}).dump()}});
  Episode e = f.run();
  EXPECT_EQ(e.ending, Ending::kMaxTurns);
  EXPECT_EQ(e.turns.size(), 3u);
  EXPECT_EQ(f.model.requests.size(), 3u);
}

TEST(AgentLoop, TheSameCallsAndResultsTurnAfterTurnAreStuck) {
  Fixture f;
  f.options.stuck_turns = 3;
  for (int i = 0; i < 10; ++i) f.model.calls({{"a", "Echo", R"({"text": "same"})"}});
  Episode e = f.run();
  EXPECT_EQ(e.ending, Ending::kStuck);
  EXPECT_EQ(e.turns.size(), 3u);
}

TEST(AgentLoop, AReplyCutAtTheTokenLimitIsNotAnAnswer) {
  Fixture f;
  f.model.text("I will now write a very long", "length");
  f.model.text("done");
  Episode e = f.run();
  EXPECT_EQ(e.ending, Ending::kFinished);
  EXPECT_EQ(e.turns.size(), 2u);
  EXPECT_EQ(e.turns[0].notes[0], "the reply was cut at max_tokens");
  EXPECT_NE(f.model.requests[1].messages.back().content.find("cut off"), std::string::npos);
}

TEST(AgentLoop, ServerErrorsEndTheEpisodeWithTheirKind) {
  Fixture refused;
  refused.model.script.push_back({{}, "", Status::InvalidArgument("HTTP 401: bad key")});
  Episode e = refused.run();
  EXPECT_EQ(e.ending, Ending::kModelRefused);
  EXPECT_EQ(e.ending_detail, "HTTP 401: bad key");
  Fixture gone;
  gone.model.script.push_back({{}, "", Status::IoError("no answer after 6 attempts")});
  EXPECT_EQ(gone.run().ending, Ending::kModelUnavailable);
}

TEST(AgentLoop, AContextOverflowCutsMoreAndTriesAgain) {
  Fixture f;
  f.options.max_context_tokens = 100000;
  f.options.max_reply_tokens = 1000;
  for (int i = 0; i < 3; ++i) {
    f.model.calls({{"a", "Echo", json({{"text", std::string(20000, 'a' + i)}}).dump()}});
  }
  f.model.script.push_back({{}, "", Status::InvalidArgument("maximum context length"), true});
  f.model.text("done");
  Episode e = f.run();
  EXPECT_EQ(e.ending, Ending::kFinished);
  // The turn after the overflow was answered; the overflow is in its notes.
  const Turn& t = e.turns[3];
  EXPECT_NE(t.notes[0].find("exceeds the context"), std::string::npos);
  EXPECT_EQ(f.model.requests.size(), 5u);
  // An overflow that never ends is the context budget's ending.
  Fixture g;
  for (int i = 0; i < 10; ++i) {
    g.model.script.push_back({{}, "", Status::InvalidArgument("maximum context length"), true});
  }
  EXPECT_EQ(g.run().ending, Ending::kContextBudget);
}

TEST(AgentLoop, TheBudgetCutsOldOutputButTheTrajectoryKeepsItWhole) {
  Fixture f;
  f.options.max_context_tokens = 4000;
  f.options.max_reply_tokens = 500;
  for (int i = 0; i < 4; ++i) {
    f.model.calls({{"a", "Echo", json({{"text", std::string(6000, 'a' + i)}}).dump()}});
  }
  Episode e = f.run();
  EXPECT_EQ(e.ending, Ending::kFinished);
  bool noted = false;
  for (const Turn& t : e.turns) noted |= !t.notes.empty();
  EXPECT_TRUE(noted);
  const auto& last = f.model.requests.back().messages;
  EXPECT_NE(last[3].content.find("older tool output cut"), std::string::npos);
  EXPECT_EQ(e.messages[3].content.size(), 6000u);
  // With a system prompt that alone overflows, nothing is sent.
  Fixture g;
  g.options.max_context_tokens = 1100;
  g.options.max_reply_tokens = 1000;
  AgentLoop loop(g.options, &g.model, &g.tools, &g.context);
  Episode over = loop.run(std::string(4000, 's'), "task");
  EXPECT_EQ(over.ending, Ending::kContextBudget);
  EXPECT_TRUE(g.model.requests.empty());
}

TEST(Trajectory, RecordHoldsTheConversationTurnsAndReward) {
  Fixture f;
  f.model.calls({{"a", "Echo", R"({"text": "one"})"}});
  Episode e = f.run();
  EpisodeInfo info;
  info.model = "m";
  info.task = {{"id", "t"}, {"path", "/t.py"}, {"sha256", "x"}};
  info.final_evaluation = {{"outcome", "pass"}, {"reward", 2}};
  json r = trajectory_record(e, info);
  EXPECT_EQ(r["schema"], kTrajectorySchema);
  EXPECT_EQ(r["reward"], 2);
  EXPECT_EQ(r["ending"]["reason"], "finished");
  EXPECT_EQ(r["messages"].size(), 5u);
  EXPECT_EQ(r["turns"][0]["tool_calls"][0]["output"], "one");
  r["id"] = 7;
  std::string shown = format_trajectory(r);
  EXPECT_NE(shown.find("run r7: t"), std::string::npos);
  EXPECT_NE(shown.find("-> Echo("), std::string::npos);
  EXPECT_NE(shown.find("final evaluation: pass, reward 2"), std::string::npos);
}

TEST(Trajectory, RunNamesReadBack) {
  EXPECT_EQ(run_name(12), "r12");
  EXPECT_EQ(parse_run_name("r12"), 12);
  for (const char* not_a_run : {"12", "r", "r1x", "rr1", "", "r-1", "r99999999999999999999"}) {
    EXPECT_EQ(parse_run_name(not_a_run), std::nullopt) << not_a_run;
  }
}

TEST(TaskMessage, SaysWhatTheEvaluationsRunAtAndOnlyWhenItIsNotTheDefault) {
  const Task task{"/tasks/relu.py", "relu", "class Model: ...\n", ""};
  const std::string plain = task_message(task, "cuda", 1);
  EXPECT_NE(plain.find("Task relu, on the cuda device."), std::string::npos);
  EXPECT_EQ(plain.find("SCALABLE_SIZES"), std::string::npos);
  EXPECT_EQ(plain.find("TF32"), std::string::npos);
  EXPECT_NE(plain.find("class Model: ..."), std::string::npos);
  const std::string tf32 = task_message(task, "cuda", 4, "tf32");
  EXPECT_NE(tf32.find("divided by 4"), std::string::npos);
  EXPECT_NE(tf32.find("GEMMs and convolutions in TF32"), std::string::npos);
}

}  // namespace
}  // namespace cuda_agent::agent
