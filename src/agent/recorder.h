/// An episode acted out by a policy without a model (the synthesizer): its actions go through
/// the same tools, in the same workspace, as an agent's, and it is recorded as the same kind of
/// trajectory, so its episodes sit beside a model's in the run store and serve as warm-up data.
/// Each turn is the policy's account of what it is doing (the assistant's text) and the tool
/// calls it makes.
#pragma once

#include <optional>
#include <string>

#include "agent/loop.h"
#include "agent/tool.h"

namespace cuda_agent::agent {

class EpisodeRecorder {
 public:
  /// context's workspace is where the calls act.
  EpisodeRecorder(ToolContext* context, const std::string& system_prompt,
                  const std::string& task_message);

  /// Starts a turn with the policy's text for it.
  void turn(const std::string& text);
  /// Runs a tool call in the current turn (run_tool_call) and records it; the output is returned
  /// as the trajectory holds it (an error is the caller's to act on).
  ToolOutput call(const std::string& tool, const nlohmann::json& arguments);
  /// The last turn: text and no calls. The episode ends finished.
  Episode finish(const std::string& text);

 private:
  void close_turn();

  ToolContext* context_;
  ToolRegistry tools_;
  Episode episode_;
  std::optional<Turn> open_;
  llm::Message assistant_;
  std::vector<llm::Message> results_;
  double started_;
};

}  // namespace cuda_agent::agent
