#include "llm/replay_client.h"

#include <gtest/gtest.h>

namespace cuda_agent::llm {
namespace {

using nlohmann::json;

TEST(ReplayClient, AnswersWithTheRecordedRepliesThenStops) {
  json record = {{"messages",
                  {{{"role", "system"}, {"content", "s"}},
                   {{"role", "user"}, {"content", "task"}},
                   {{"role", "assistant"},
                    {"content", nullptr},
                    {"tool_calls",
                     {{{"id", "c1"},
                       {"type", "function"},
                       {"function", {{"name", "Bash"}, {"arguments", "{\"command\": \"ls\"}"}}}}}}},
                   {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "x"}},
                   {{"role", "assistant"}, {"content", "done"}}}}};
  std::vector<Message> replies;
  ASSERT_TRUE(ReplayClient::from_trajectory(record, &replies).ok());
  ASSERT_EQ(replies.size(), 2u);
  ReplayClient client(replies);
  ChatResponse r;
  CallInfo info;
  ASSERT_TRUE(client.complete({}, &r, &info).ok());
  EXPECT_EQ(r.finish_reason, "tool_calls");
  EXPECT_EQ(r.message.tool_calls[0].arguments, "{\"command\": \"ls\"}");
  ASSERT_TRUE(client.complete({}, &r, &info).ok());
  EXPECT_EQ(r.message.content, "done");
  ASSERT_TRUE(client.complete({}, &r, &info).ok());  // past the end: text, no calls
  EXPECT_TRUE(r.message.tool_calls.empty());
  EXPECT_EQ(client.replayed(), 2u);
}

TEST(ReplayClient, ARecordWithoutRepliesIsRefused) {
  std::vector<Message> replies;
  EXPECT_FALSE(ReplayClient::from_trajectory(json::object(), &replies).ok());
  Status s = ReplayClient::from_trajectory(
      {{"messages", {{{"role", "user"}, {"content", "task"}}}}}, &replies);
  EXPECT_NE(s.message().find("no assistant messages"), std::string::npos);
}

}  // namespace
}  // namespace cuda_agent::llm
