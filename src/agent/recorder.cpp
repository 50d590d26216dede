#include "agent/recorder.h"

#include <chrono>

namespace cuda_agent::agent {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

EpisodeRecorder::EpisodeRecorder(ToolContext* context, const std::string& system_prompt,
                                 const std::string& task_message)
    : context_(context), tools_(default_tools()), started_(now_s()) {
  episode_.messages = {llm::Message::system(system_prompt), llm::Message::user(task_message)};
}

void EpisodeRecorder::close_turn() {
  if (!open_) return;
  episode_.messages.push_back(assistant_);
  for (llm::Message& m : results_) episode_.messages.push_back(std::move(m));
  results_.clear();
  episode_.turns.push_back(*open_);
  open_.reset();
}

void EpisodeRecorder::turn(const std::string& text) {
  close_turn();
  open_ = Turn{};
  open_->number = static_cast<int>(episode_.turns.size()) + 1;
  assistant_ = {"assistant", text, {}, "", ""};
}

ToolOutput EpisodeRecorder::call(const std::string& tool, const nlohmann::json& arguments) {
  if (!open_) turn("");
  const llm::ToolCall call{
      "call_" + std::to_string(open_->number) + "_" + std::to_string(open_->tools.size() + 1), tool,
      arguments.dump()};
  ToolEvent event = run_tool_call(tools_, *context_, call);
  assistant_.tool_calls.push_back(call);
  results_.push_back(llm::Message::tool(call.id, event.output));
  ToolOutput output{event.output, event.error};
  open_->tools.push_back(std::move(event));
  return output;
}

Episode EpisodeRecorder::finish(const std::string& text) {
  turn(text);
  close_turn();
  episode_.ending = Ending::kFinished;
  episode_.seconds = now_s() - started_;
  return episode_;
}

}  // namespace cuda_agent::agent
