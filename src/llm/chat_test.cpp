#include "llm/chat.h"

#include <gtest/gtest.h>

#include "llm/client.h"

namespace cuda_agent::llm {
namespace {

using nlohmann::json;

TEST(Chat, AnAssistantMessageWithCallsAndNoTextSendsNullContent) {
  Message m{"assistant", "", {{"call_1", "Read", R"({"file_path": "model.py"})"}}, "", ""};
  json j = m.to_json();
  EXPECT_TRUE(j["content"].is_null());
  EXPECT_EQ(j["tool_calls"][0]["type"], "function");
  EXPECT_EQ(j["tool_calls"][0]["function"]["arguments"], R"({"file_path": "model.py"})");
  EXPECT_FALSE(j.contains("tool_call_id"));
  json tool = Message::tool("call_1", "text").to_json();
  EXPECT_EQ(tool, json({{"role", "tool"}, {"content", "text"}, {"tool_call_id", "call_1"}}));
}

TEST(Chat, RequestCarriesToolsOnlyWhenThereAreSome) {
  ChatRequest r{"m", {Message::user("hi")}, json::array(), std::nullopt, 100};
  json j = r.to_json();
  EXPECT_FALSE(j.contains("tools"));
  EXPECT_FALSE(j.contains("temperature"));
  EXPECT_EQ(j["max_tokens"], 100);
  r.tools = json::array({{{"type", "function"}, {"function", {{"name", "Read"}}}}});
  r.temperature = 0.2;
  j = r.to_json();
  EXPECT_EQ(j["tool_choice"], "auto");
  EXPECT_DOUBLE_EQ(j["temperature"].get<double>(), 0.2);
}

TEST(Chat, ParsesAResponseWithCallsUsageAndReasoning) {
  const std::string body = R"({"id": "chatcmpl-1", "choices": [{"index": 0, "message": {
      "role": "assistant", "content": null, "reasoning_content": "think",
      "tool_calls": [{"id": "t1", "type": "function",
                      "function": {"name": "Bash", "arguments": {"command": "ls"}}}]},
      "finish_reason": "tool_calls"}],
      "usage": {"prompt_tokens": 10, "completion_tokens": 5}})";
  ChatResponse r;
  ASSERT_TRUE(ChatResponse::parse(body, &r).ok());
  EXPECT_EQ(r.id, "chatcmpl-1");
  EXPECT_EQ(r.finish_reason, "tool_calls");
  EXPECT_EQ(r.message.content, "");
  EXPECT_EQ(r.message.reasoning, "think");
  ASSERT_EQ(r.message.tool_calls.size(), 1u);
  // Arguments sent as an object are kept as their JSON text.
  EXPECT_EQ(json::parse(r.message.tool_calls[0].arguments), json({{"command", "ls"}}));
  ASSERT_TRUE(r.usage.has_value());
  EXPECT_EQ(r.usage->total_tokens, 15);
}

TEST(Chat, ContentAsPartsIsJoined) {
  Message m;
  ASSERT_TRUE(Message::from_json(json::parse(R"({"role": "assistant", "content": [
      {"type": "text", "text": "a"}, {"type": "image_url"}, {"type": "text", "text": "b"}]})"),
                                 &m)
                  .ok());
  EXPECT_EQ(m.content, "ab");
}

TEST(Chat, ABodyWithoutAMessageIsAnErrorSayingSo) {
  ChatResponse r;
  Status s = ChatResponse::parse("not json", &r);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not JSON"), std::string::npos);
  s = ChatResponse::parse(R"({"choices": []})", &r);
  EXPECT_NE(s.message().find("choices[0].message"), std::string::npos);
  s = ChatResponse::parse(R"({"choices": [{"message": {"tool_calls": [{"id": "x"}]}}]})", &r);
  EXPECT_NE(s.message().find("no function"), std::string::npos);
}

TEST(Chat, ContextOverflowIsRecognisedInTheServersWords) {
  EXPECT_TRUE(says_context_overflow(
      "This model's maximum context length is 8192 tokens. However, you requested 9000"));
  EXPECT_TRUE(says_context_overflow("the request exceeds the available context size"));
  EXPECT_TRUE(says_context_overflow("prompt is too long: 200000 tokens > 100000 maximum"));
  EXPECT_FALSE(says_context_overflow("The model `x` does not exist."));
}

TEST(HttpClient, ARefusedConnectionIsRetriedThenReported) {
  HttpClientOptions o;
  o.endpoint = "http://127.0.0.1:9/v1/";  // discard port: nothing listens
  o.max_attempts = 3;
  o.backoff_s = 0.01;
  HttpLlmClient client(o);
  EXPECT_EQ(client.url(), "http://127.0.0.1:9/v1/chat/completions");
  ChatResponse r;
  CallInfo info;
  Status s = client.complete({"m", {Message::user("hi")}, json::array(), {}, {}}, &r, &info);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kIoError);
  EXPECT_EQ(info.attempts, 3);
  EXPECT_EQ(info.retries.size(), 2u);
  EXPECT_NE(s.message().find("after 3 attempts"), std::string::npos);
}

}  // namespace
}  // namespace cuda_agent::llm
