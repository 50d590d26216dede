/// Tool calls that a model wrote into its text instead of the tool_calls field: models served
/// without a tool-call parser, or ones that slip into their training format. The agent loop reads
/// them from the text when a response has no structured calls.
///
/// Recognised forms:
///   <tool_call>{"name": "Read", "arguments": {...}}</tool_call>           Hermes, Qwen
///   <function=Read>{"file_path": "model.py"}</function>                   Llama 3.1
///   <function=Read><parameter=file_path>model.py</parameter></function>   Qwen3-Coder
///   a ```json fenced block, or a whole message, that is {"name", "arguments"|"parameters"}
/// The tagged forms are taken whatever the name (an unknown one is the loop's to report); the
/// untagged JSON forms only when the name is one of the known tools, so an example in prose is
/// not run.
#pragma once

#include <string>
#include <vector>

#include "llm/chat.h"

namespace cuda_agent::llm {

struct TextToolCalls {
  std::vector<ToolCall> calls;  // ids "text-call-1", ...; a call that could not be read has an
                                // empty name and its raw text as arguments
  std::string remaining;        // the text with the calls taken out, trimmed
};

TextToolCalls parse_text_tool_calls(const std::string& text,
                                    const std::vector<std::string>& known_tools);

}  // namespace cuda_agent::llm
