#include "agent/context.h"

#include <cmath>

namespace cuda_agent::agent {

namespace {

constexpr long long kTokensPerMessage = 4;
const char kCutMarker[] = "[older tool output cut to save context: ";

std::size_t message_chars(const llm::Message& m) {
  std::size_t n = m.content.size() + m.tool_call_id.size();
  for (const llm::ToolCall& c : m.tool_calls) n += c.id.size() + c.name.size() + c.arguments.size();
  return n;
}

bool already_cut(const llm::Message& m) { return m.content.find(kCutMarker) != std::string::npos; }

std::string cut_to(const std::string& text, std::size_t kept_chars) {
  const std::size_t half = kept_chars / 2;
  return text.substr(0, half) + "\n" + kCutMarker + std::to_string(text.size()) +
         " characters in all]\n" + text.substr(text.size() - half);
}

}  // namespace

long long estimate_tokens(const std::vector<llm::Message>& messages, std::size_t extra_chars,
                          double chars_per_token) {
  std::size_t chars = extra_chars;
  for (const llm::Message& m : messages) chars += message_chars(m);
  return static_cast<long long>(std::ceil(chars / chars_per_token)) +
         kTokensPerMessage * static_cast<long long>(messages.size());
}

ContextFit fit_context(std::vector<llm::Message>* messages, std::size_t extra_chars,
                       double chars_per_token, long long budget_tokens, std::size_t keep_last,
                       std::size_t kept_chars) {
  ContextFit fit;
  fit.tokens_before = estimate_tokens(*messages, extra_chars, chars_per_token);
  fit.tokens_after = fit.tokens_before;
  // First pass spares the most recent messages; the second cuts those too.
  for (std::size_t spare : {keep_last, std::size_t{0}}) {
    const std::size_t end = messages->size() > spare ? messages->size() - spare : 0;
    for (std::size_t i = 0; i < end && fit.tokens_after > budget_tokens; ++i) {
      llm::Message& m = (*messages)[i];
      if (m.role != "tool" || m.content.size() <= kept_chars + 100 || already_cut(m)) continue;
      m.content = cut_to(m.content, kept_chars);
      ++fit.cut;
      fit.tokens_after = estimate_tokens(*messages, extra_chars, chars_per_token);
    }
  }
  fit.fits = fit.tokens_after <= budget_tokens;
  return fit;
}

}  // namespace cuda_agent::agent
