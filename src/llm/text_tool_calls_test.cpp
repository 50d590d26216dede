#include "llm/text_tool_calls.h"

#include <gtest/gtest.h>

namespace cuda_agent::llm {
namespace {

using nlohmann::json;

const std::vector<std::string> kTools = {"Read", "Bash"};

TEST(TextToolCalls, HermesTagsAreCallsWhateverTheName) {
  TextToolCalls t = parse_text_tool_calls(
      "Let me look.\n<tool_call>\n{\"name\": \"Read\", \"arguments\": {\"file_path\": \"a\"}}\n"
      "</tool_call>\n<tool_call>{\"name\": \"Nope\", \"arguments\": {}}</tool_call>",
      kTools);
  ASSERT_EQ(t.calls.size(), 2u);
  EXPECT_EQ(t.calls[0].name, "Read");
  EXPECT_EQ(json::parse(t.calls[0].arguments), json({{"file_path", "a"}}));
  EXPECT_EQ(t.calls[0].id, "text-call-1");
  EXPECT_EQ(t.calls[1].name, "Nope");  // the loop reports the unknown tool
  EXPECT_EQ(t.remaining, "Let me look.");
}

TEST(TextToolCalls, AnUnreadableTaggedCallKeepsItsTextAndNoName) {
  TextToolCalls t = parse_text_tool_calls("<tool_call>{\"name\": \"Read\", </tool_call>", kTools);
  ASSERT_EQ(t.calls.size(), 1u);
  EXPECT_EQ(t.calls[0].name, "");
  EXPECT_EQ(t.calls[0].arguments, "{\"name\": \"Read\",");
}

TEST(TextToolCalls, FunctionTagsWithJsonOrParameters) {
  TextToolCalls t =
      parse_text_tool_calls("<function=Read>{\"file_path\": \"m.py\"}</function>", kTools);
  ASSERT_EQ(t.calls.size(), 1u);
  EXPECT_EQ(json::parse(t.calls[0].arguments), json({{"file_path", "m.py"}}));
  t = parse_text_tool_calls(
      "<function=Bash>\n<parameter=command>\necho \"hi\"\n</parameter>\n"
      "<parameter=timeout>5000</parameter>\n</function>",
      kTools);
  ASSERT_EQ(t.calls.size(), 1u);
  EXPECT_EQ(t.calls[0].name, "Bash");
  EXPECT_EQ(json::parse(t.calls[0].arguments),
            json({{"command", "echo \"hi\""}, {"timeout", "5000"}}));
}

TEST(TextToolCalls, UntaggedJsonOnlyForKnownTools) {
  TextToolCalls t = parse_text_tool_calls(
      "I'll run:\n```json\n{\"name\": \"Bash\", \"parameters\": {\"command\": \"ls\"}}\n```",
      kTools);
  ASSERT_EQ(t.calls.size(), 1u);
  EXPECT_EQ(json::parse(t.calls[0].arguments), json({{"command", "ls"}}));
  EXPECT_EQ(t.remaining, "I'll run:");
  // An example in prose naming something else is not a call.
  t = parse_text_tool_calls("```json\n{\"name\": \"Alice\", \"arguments\": {}}\n```", kTools);
  EXPECT_TRUE(t.calls.empty());
  t = parse_text_tool_calls(
      "{\"name\": \"Read\", \"arguments\": \"{\\\"file_path\\\": \\\"x\\\"}\"}", kTools);
  ASSERT_EQ(t.calls.size(), 1u);
  EXPECT_EQ(json::parse(t.calls[0].arguments), json({{"file_path", "x"}}));
}

TEST(TextToolCalls, PlainTextHasNoCalls) {
  TextToolCalls t = parse_text_tool_calls("  All done: the kernel is 1.3x faster.  ", kTools);
  EXPECT_TRUE(t.calls.empty());
  EXPECT_EQ(t.remaining, "All done: the kernel is 1.3x faster.");
}

}  // namespace
}  // namespace cuda_agent::llm
