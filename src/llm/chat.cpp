#include "llm/chat.h"

namespace cuda_agent::llm {

using nlohmann::json;

json Message::to_json() const {
  json j = {{"role", role}};
  if (role == "assistant" && content.empty() && !tool_calls.empty()) {
    j["content"] = nullptr;
  } else {
    j["content"] = content;
  }
  if (!tool_calls.empty()) {
    j["tool_calls"] = json::array();
    for (const ToolCall& c : tool_calls) {
      j["tool_calls"].push_back({{"id", c.id},
                                 {"type", "function"},
                                 {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    }
  }
  if (role == "tool") j["tool_call_id"] = tool_call_id;
  return j;
}

namespace {

/// content as a string, or a list of {"type": "text", "text"} parts joined.
std::string content_text(const json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string text;
  if (content.is_array()) {
    for (const json& part : content) {
      if (part.is_object() && part.value("type", "") == "text" && part.contains("text") &&
          part["text"].is_string()) {
        text += part["text"].get<std::string>();
      }
    }
  }
  return text;
}

}  // namespace

Status Message::from_json(const json& j, Message* message) {
  if (!j.is_object()) return Status::InvalidArgument("a message is not a JSON object");
  Message m;
  m.role = j.value("role", "assistant");
  if (j.contains("content") && !j["content"].is_null()) m.content = content_text(j["content"]);
  for (const char* key : {"reasoning_content", "reasoning"}) {
    if (j.contains(key) && j[key].is_string()) m.reasoning = j[key].get<std::string>();
  }
  if (j.contains("tool_calls") && j["tool_calls"].is_array()) {
    int n = 0;
    for (const json& c : j["tool_calls"]) {
      ++n;
      if (!c.is_object() || !c.contains("function") || !c["function"].is_object()) {
        return Status::InvalidArgument("tool call " + std::to_string(n) + " has no function");
      }
      const json& f = c["function"];
      ToolCall call;
      call.id = c.contains("id") && c["id"].is_string() ? c["id"].get<std::string>() : "";
      call.name = f.contains("name") && f["name"].is_string() ? f["name"].get<std::string>() : "";
      // Some servers send the arguments as an object rather than its JSON text.
      if (f.contains("arguments")) {
        call.arguments =
            f["arguments"].is_string() ? f["arguments"].get<std::string>() : f["arguments"].dump();
      }
      m.tool_calls.push_back(std::move(call));
    }
  }
  if (j.contains("tool_call_id") && j["tool_call_id"].is_string()) {
    m.tool_call_id = j["tool_call_id"].get<std::string>();
  }
  *message = std::move(m);
  return Status::OK();
}

json Usage::to_json() const {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", total_tokens}};
}

json ChatRequest::to_json() const {
  json j = {{"model", model}, {"messages", json::array()}};
  for (const Message& m : messages) j["messages"].push_back(m.to_json());
  if (!tools.empty()) {
    j["tools"] = tools;
    j["tool_choice"] = "auto";
  }
  if (temperature) j["temperature"] = *temperature;
  if (max_tokens) j["max_tokens"] = *max_tokens;
  return j;
}

Status ChatResponse::parse(const std::string& body, ChatResponse* response) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return Status::InvalidArgument("the response is not JSON: " + body.substr(0, 200));
  }
  if (!j.is_object() || !j.contains("choices") || !j["choices"].is_array() ||
      j["choices"].empty() || !j["choices"][0].is_object() ||
      !j["choices"][0].contains("message")) {
    return Status::InvalidArgument("the response has no choices[0].message: " +
                                   j.dump().substr(0, 200));
  }
  ChatResponse r;
  if (j.contains("id") && j["id"].is_string()) r.id = j["id"].get<std::string>();
  const json& choice = j["choices"][0];
  if (Status s = Message::from_json(choice["message"], &r.message); !s.ok()) return s;
  r.message.role = "assistant";
  if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) {
    r.finish_reason = choice["finish_reason"].get<std::string>();
  }
  if (j.contains("usage") && j["usage"].is_object()) {
    const json& u = j["usage"];
    Usage usage;
    auto count = [&u](const char* key) {
      return u.contains(key) && u[key].is_number_integer() ? u[key].get<long long>() : 0LL;
    };
    usage.prompt_tokens = count("prompt_tokens");
    usage.completion_tokens = count("completion_tokens");
    usage.total_tokens = count("total_tokens");
    if (usage.total_tokens == 0) usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
    r.usage = usage;
  }
  *response = std::move(r);
  return Status::OK();
}

}  // namespace cuda_agent::llm
