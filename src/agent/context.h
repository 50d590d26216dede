/// The context budget: a conversation must fit the model's context with room for its reply.
/// When it would not, older tool output goes first, oldest first, each cut to its head and tail
/// with a marker; the system prompt (and the skill in it) and the task's message are never cut.
#pragma once

#include <string>
#include <vector>

#include "llm/chat.h"

namespace cuda_agent::agent {

/// Tokens a conversation would take, estimated from its characters (chars_per_token, which the
/// loop calibrates from the server's own counts), plus the tools' schemas (extra_chars) and a
/// few tokens per message.
long long estimate_tokens(const std::vector<llm::Message>& messages, std::size_t extra_chars,
                          double chars_per_token);

struct ContextFit {
  int cut = 0;  // tool messages cut this time
  long long tokens_before = 0;
  long long tokens_after = 0;
  bool fits = false;
};

/// Cuts tool messages, oldest first, down to kept_chars each, until the estimate is at most
/// budget_tokens. The last keep_last messages are left alone while anything older can be cut.
ContextFit fit_context(std::vector<llm::Message>* messages, std::size_t extra_chars,
                       double chars_per_token, long long budget_tokens, std::size_t keep_last = 2,
                       std::size_t kept_chars = 400);

}  // namespace cuda_agent::agent
