#include "llm/text_tool_calls.h"

#include <algorithm>
#include <regex>

#include "util/text.h"

namespace cuda_agent::llm {

namespace {

using nlohmann::json;

/// {"name", "arguments" | "parameters"} as a call; false when the object is not one.
bool call_from_object(const json& j, ToolCall* call) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
  call->name = j["name"].get<std::string>();
  const char* key = j.contains("arguments") ? "arguments" : "parameters";
  if (!j.contains(key) || j[key].is_null()) {
    call->arguments = "{}";
  } else {
    call->arguments = j[key].is_string() ? j[key].get<std::string>() : j[key].dump();
  }
  return true;
}

/// The text between open and close, each occurrence; the spans are reported so they can be cut.
struct Span {
  std::size_t begin, end;  // of the whole tagged text
  std::string inner;
  std::string attribute;  // the NAME of <function=NAME>
};

std::vector<Span> tagged(const std::string& text, const std::regex& open,
                         const std::string& close) {
  std::vector<Span> spans;
  auto it = std::sregex_iterator(text.begin(), text.end(), open);
  std::size_t from = 0;
  for (; it != std::sregex_iterator(); ++it) {
    const std::size_t start = it->position(0);
    if (start < from) continue;  // nested inside the previous span
    const std::size_t inner = start + it->length(0);
    std::size_t end = text.find(close, inner);
    Span s;
    s.begin = start;
    s.attribute = it->size() > 1 ? (*it)[1].str() : "";
    if (end == std::string::npos) {  // unterminated: to the end of the text
      s.inner = text.substr(inner);
      s.end = text.size();
    } else {
      s.inner = text.substr(inner, end - inner);
      s.end = end + close.size();
    }
    from = s.end;
    spans.push_back(std::move(s));
  }
  return spans;
}

std::string cut(const std::string& text, const std::vector<Span>& spans) {
  std::string rest;
  std::size_t at = 0;
  for (const Span& s : spans) {
    rest += text.substr(at, s.begin - at);
    at = s.end;
  }
  return trim(rest + text.substr(std::min(at, text.size())));
}

}  // namespace

TextToolCalls parse_text_tool_calls(const std::string& text,
                                    const std::vector<std::string>& known_tools) {
  TextToolCalls out;
  auto known = [&](const std::string& name) {
    return std::find(known_tools.begin(), known_tools.end(), name) != known_tools.end();
  };
  auto add = [&out](ToolCall call) {
    call.id = "text-call-" + std::to_string(out.calls.size() + 1);
    out.calls.push_back(std::move(call));
  };

  // <tool_call>{...}</tool_call>
  static const std::regex kToolCall(R"(<tool_call>)");
  std::vector<Span> spans = tagged(text, kToolCall, "</tool_call>");
  if (!spans.empty()) {
    for (const Span& s : spans) {
      ToolCall call;
      json j = json::parse(trim(s.inner), nullptr, false);
      if (j.is_discarded() || !call_from_object(j, &call)) {
        call.name.clear();
        call.arguments = trim(s.inner);
      }
      add(std::move(call));
    }
    out.remaining = cut(text, spans);
    return out;
  }

  // <function=NAME>...</function>: a JSON object, or <parameter=K>V</parameter> pairs.
  static const std::regex kFunction(R"(<function=([A-Za-z0-9_.\-]+)>)");
  spans = tagged(text, kFunction, "</function>");
  if (!spans.empty()) {
    static const std::regex kParameter(R"(<parameter=([A-Za-z0-9_\-]+)>([\s\S]*?)</parameter>)");
    for (const Span& s : spans) {
      ToolCall call;
      call.name = s.attribute;
      const std::string inner = trim(s.inner);
      if (inner.rfind("<parameter=", 0) == 0) {
        json args = json::object();
        for (auto p = std::sregex_iterator(inner.begin(), inner.end(), kParameter);
             p != std::sregex_iterator(); ++p) {
          std::string value = (*p)[2].str();
          // One newline around a value is layout, not content.
          if (!value.empty() && value.front() == '\n') value.erase(0, 1);
          if (!value.empty() && value.back() == '\n') value.pop_back();
          // Kept as text: only the tool's schema could say whether "1.50" is a number, and
          // the tools take numbers and booleans written as text.
          args[(*p)[1].str()] = value;
        }
        call.arguments = args.dump();
      } else {
        call.arguments = inner.empty() ? "{}" : inner;
      }
      add(std::move(call));
    }
    out.remaining = cut(text, spans);
    return out;
  }

  // ```json fenced blocks holding a call to a known tool.
  static const std::regex kFence(R"(```(?:json|JSON)?[ \t]*\n([\s\S]*?)```)");
  std::vector<Span> fenced;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kFence);
       it != std::sregex_iterator(); ++it) {
    ToolCall call;
    json j = json::parse(trim((*it)[1].str()), nullptr, false);
    if (j.is_discarded() || !call_from_object(j, &call) || !known(call.name)) continue;
    add(std::move(call));
    fenced.push_back({static_cast<std::size_t>(it->position(0)),
                      static_cast<std::size_t>(it->position(0) + it->length(0)), "", ""});
  }
  if (!fenced.empty()) {
    out.remaining = cut(text, fenced);
    return out;
  }

  // A message that is nothing but a call.
  json j = json::parse(trim(text), nullptr, false);
  ToolCall call;
  if (!j.is_discarded() && call_from_object(j, &call) && known(call.name)) {
    add(std::move(call));
    return out;
  }
  out.remaining = trim(text);
  return out;
}

}  // namespace cuda_agent::llm
