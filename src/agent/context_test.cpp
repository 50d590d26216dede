#include "agent/context.h"

#include <gtest/gtest.h>

namespace cuda_agent::agent {
namespace {

using llm::Message;

std::vector<Message> conversation(int tool_messages, std::size_t chars_each) {
  std::vector<Message> m = {Message::system(std::string(4000, 's')), Message::user("task")};
  for (int i = 0; i < tool_messages; ++i) {
    m.push_back({"assistant", "", {{"c" + std::to_string(i), "Bash", "{}"}}, "", ""});
    m.push_back(Message::tool("c" + std::to_string(i),
                              std::to_string(i) + ":" + std::string(chars_each, 'x')));
  }
  return m;
}

TEST(Context, AConversationThatFitsIsLeftAlone) {
  auto m = conversation(3, 100);
  auto before = m;
  ContextFit fit = fit_context(&m, 0, 4.0, 100000);
  EXPECT_TRUE(fit.fits);
  EXPECT_EQ(fit.cut, 0);
  EXPECT_EQ(m[2].tool_calls[0].id, before[2].tool_calls[0].id);
  EXPECT_EQ(m[3].content, before[3].content);
}

TEST(Context, OldestToolOutputGoesFirstAndTheSystemPromptNever) {
  auto m = conversation(4, 8000);  // ~2000 tokens each at 4 chars a token
  const long long all = estimate_tokens(m, 0, 4.0);
  ContextFit fit = fit_context(&m, 0, 4.0, all - 3000);
  EXPECT_TRUE(fit.fits);
  EXPECT_EQ(fit.cut, 2);
  EXPECT_NE(m[3].content.find("older tool output cut"), std::string::npos);  // the first
  EXPECT_NE(m[5].content.find("older tool output cut"), std::string::npos);  // the second
  EXPECT_EQ(m[7].content.size(), 8002u);                                     // left whole
  EXPECT_EQ(m[0].content, std::string(4000, 's'));
  EXPECT_EQ(m[3].content.rfind("0:", 0), 0u);  // the head is kept
}

TEST(Context, TheNewestOutputsAreCutOnlyWhenNothingOlderIsLeft) {
  auto m = conversation(2, 8000);
  ContextFit fit = fit_context(&m, 0, 4.0, 1500);
  EXPECT_TRUE(fit.fits) << fit.tokens_after;
  EXPECT_EQ(fit.cut, 2);
}

TEST(Context, WhatCannotFitSaysSo) {
  auto m = conversation(1, 100);
  ContextFit fit = fit_context(&m, 0, 4.0, 500);  // the system prompt alone is ~1000 tokens
  EXPECT_FALSE(fit.fits);
  EXPECT_EQ(m[0].content.size(), 4000u);
  // A cut output is not cut again.
  auto big = conversation(3, 8000);
  fit_context(&big, 0, 4.0, 2500);
  auto again = big;
  EXPECT_EQ(fit_context(&again, 0, 4.0, 10).cut, 0);
}

TEST(Context, TheToolsSchemasCount) {
  auto m = conversation(0, 0);
  EXPECT_EQ(estimate_tokens(m, 4000, 4.0) - estimate_tokens(m, 0, 4.0), 1000);
}

}  // namespace
}  // namespace cuda_agent::agent
