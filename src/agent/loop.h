/// The agent: a ReAct loop over a model that calls tools. A turn sends the conversation (system
/// prompt with the skill, the task, every reply and tool result so far) with the tools' schemas,
/// runs the tool calls in the reply, appends their results, and repeats while the model calls
/// tools. An error the model can fix (a malformed call, an unknown tool, a failing tool) goes
/// back to it as the tool's message; only what the loop cannot go on from ends the episode, and
/// every ending has a typed reason.
///
/// The loop knows nothing of which model answers (llm::LlmClient) or what the tools do
/// (ToolRegistry); what the episode earns is decided afterwards by a fresh evaluation of the
/// workspace, never by anything the model said.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "agent/tool.h"
#include "llm/chat.h"
#include "llm/client.h"

namespace cuda_agent::agent {

struct AgentOptions {
  std::string model;
  int max_turns = 40;
  long long max_context_tokens = 32768;  // the model's context
  int max_reply_tokens = 4096;           // asked of each reply, and kept free in the context
  std::optional<double> temperature;
  /// Turns in a row with the same calls getting the same results that end the episode as stuck.
  int stuck_turns = 4;
};

enum class Ending {
  kFinished,          // the model answered without calling a tool
  kMaxTurns,          // the turn budget ran out
  kContextBudget,     // the conversation no longer fits the context, even cut
  kModelRefused,      // the server refused a request (a 4xx)
  kModelUnavailable,  // the server did not answer, retries exhausted
  kStuck,             // the same calls and results, turn after turn
  kInterrupted,       // the user interrupted cuda-agent
};
std::string ending_name(Ending ending);

/// One tool call as it ran.
struct ToolEvent {
  std::string call_id;
  std::string name;
  std::string arguments;  // as the model wrote them
  std::string output;     // what the model was shown
  bool error = false;
  double seconds = 0;
};

struct Turn {
  int number = 0;
  double model_seconds = 0;
  int attempts = 0;
  std::vector<std::string> retries;  // why attempts were retried (429, 5xx, dropped connection)
  std::optional<llm::Usage> usage;
  std::string finish_reason;
  bool calls_from_text = false;  // the calls were read from the reply's text
  std::vector<ToolEvent> tools;
  std::vector<std::string> notes;  // context cuts, a reply cut at max_tokens, ...
};

struct Episode {
  /// The whole conversation, never cut (the model may have been shown a cut one).
  std::vector<llm::Message> messages;
  std::vector<Turn> turns;
  Ending ending = Ending::kFinished;
  std::string ending_detail;
  llm::Usage tokens;  // summed over the turns the server counted
  double seconds = 0;
};

class AgentLoop {
 public:
  using Progress = std::function<void(const std::string&)>;
  AgentLoop(AgentOptions options, llm::LlmClient* client, const ToolRegistry* tools,
            ToolContext* context, Progress progress = {});
  Episode run(const std::string& system_prompt, const std::string& task_message);

 private:
  AgentOptions options_;
  llm::LlmClient* client_;
  const ToolRegistry* tools_;
  ToolContext* context_;
  Progress progress_;
};

/// Runs one call through its tool in context. A call that could not be read, an unknown tool,
/// arguments that are not a JSON object and a tool that throws are errors the model can act on;
/// the output is made valid UTF-8 (a command may print any bytes), and an error's starts with
/// "Error: ". The loop and the EpisodeRecorder both call tools through it.
ToolEvent run_tool_call(const ToolRegistry& tools, ToolContext& context, const llm::ToolCall& call);

/// One line for a person: "Bash(python utils/compile.py)", "Read(model.py)", ...
std::string describe_call(const std::string& name, const std::string& arguments);

}  // namespace cuda_agent::agent
