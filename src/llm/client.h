/// A model behind an OpenAI-compatible Chat Completions endpoint. The agent loop talks to this
/// interface only, so tests substitute a scripted model and the loop never knows which model
/// answers.
#pragma once

#include <string>
#include <vector>

#include "llm/chat.h"
#include "util/status.h"

namespace cuda_agent::llm {

/// What one completion cost and met on the way, for the trajectory.
struct CallInfo {
  int attempts = 0;
  int http_status = 0;               // of the last attempt; 0 when no response came
  std::vector<std::string> retries;  // why each failed attempt was retried
  bool context_overflow = false;     // the server said the prompt is too long for the model
  double seconds = 0;
};

class LlmClient {
 public:
  virtual ~LlmClient() = default;
  /// One completion. A non-OK Status means no response could be had: a 4xx (the request was
  /// refused; info->context_overflow says whether for its length) or retries exhausted.
  virtual Status complete(const ChatRequest& request, ChatResponse* response, CallInfo* info) = 0;
};

struct HttpClientOptions {
  /// The server's base URL ("http://127.0.0.1:8000/v1"); /chat/completions is added unless the
  /// URL already ends with it.
  std::string endpoint;
  std::string api_key;     // sent as a bearer token when not empty
  double timeout_s = 600;  // per attempt
  double connect_timeout_s = 10;
  int max_attempts = 6;  // the first try and five retries
  double backoff_s = 1;  // doubled after each retry, up to max_backoff_s
  double max_backoff_s = 30;
};

/// Chat Completions over HTTP (libcurl). Retries, with exponential backoff, on 429 (honouring
/// Retry-After), 5xx, a dropped or refused connection and a timeout; a 4xx other than 429 is
/// returned at once with the server's own message.
class HttpLlmClient : public LlmClient {
 public:
  explicit HttpLlmClient(HttpClientOptions options);
  Status complete(const ChatRequest& request, ChatResponse* response, CallInfo* info) override;
  /// The URL requests go to.
  const std::string& url() const { return url_; }

 private:
  HttpClientOptions options_;
  std::string url_;
};

/// Whether an error body or message says the prompt is longer than the model's context (the
/// wordings of vLLM, SGLang, llama.cpp, Ollama and OpenAI).
bool says_context_overflow(const std::string& text);

}  // namespace cuda_agent::llm
