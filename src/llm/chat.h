/// The OpenAI Chat Completions format with tool calls, as vLLM, SGLang, Ollama and llama.cpp's
/// server speak it: the messages of a conversation, the request that sends them with the tools'
/// schemas, and the response that comes back. One struct per object, one to_json and one parse,
/// so the wire format is written down once.
///
///   request:  {"model", "messages": [...], "tools": [{"type": "function", "function": {...}}],
///              "tool_choice": "auto", "temperature", "max_tokens"}
///   assistant message: {"role": "assistant", "content": text or null,
///                       "tool_calls": [{"id", "type": "function",
///                                       "function": {"name", "arguments": JSON text}}]}
///   tool message: {"role": "tool", "tool_call_id", "content"}
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "util/status.h"

namespace cuda_agent::llm {

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // the JSON text as the model wrote it, which may not parse
};

struct Message {
  std::string role;  // "system", "user", "assistant" or "tool"
  std::string content;
  std::vector<ToolCall> tool_calls;  // assistant
  std::string tool_call_id;          // tool
  /// The model's reasoning where the server returns it apart from the content
  /// (reasoning_content); kept in the trajectory, not sent back.
  std::string reasoning;

  static Message system(std::string text) { return {"system", std::move(text), {}, {}, {}}; }
  static Message user(std::string text) { return {"user", std::move(text), {}, {}, {}}; }
  static Message tool(std::string call_id, std::string text) {
    return {"tool", std::move(text), {}, std::move(call_id), {}};
  }

  /// The wire form: an assistant message with calls and no text has "content": null.
  nlohmann::json to_json() const;
  /// Reads a message in the wire form; tolerates content given as a list of text parts.
  static Status from_json(const nlohmann::json& j, Message* message);
};

struct Usage {
  long long prompt_tokens = 0;
  long long completion_tokens = 0;
  long long total_tokens = 0;
  nlohmann::json to_json() const;
};

struct ChatRequest {
  std::string model;
  std::vector<Message> messages;
  nlohmann::json tools = nlohmann::json::array();  // ToolRegistry::specs()
  std::optional<double> temperature;
  std::optional<int> max_tokens;
  nlohmann::json to_json() const;
};

struct ChatResponse {
  std::string id;
  Message message;            // choices[0].message
  std::string finish_reason;  // "stop", "tool_calls", "length", ...
  std::optional<Usage> usage;

  /// Parses a response body. A body that is not JSON, or has no choices[0].message, is an
  /// InvalidArgument naming what was missing.
  static Status parse(const std::string& body, ChatResponse* response);
};

}  // namespace cuda_agent::llm
