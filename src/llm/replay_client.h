/// A model that answers with the assistant messages of a recorded episode, in order: the
/// `replay` policy. The loop runs the recorded calls through the real tools in a fresh workspace,
/// so an episode can be re-run on another device or after a change to the tools or the
/// evaluator, and debugged without a model. After the last recorded reply it answers with text
/// and no calls, which ends the episode.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "llm/client.h"

namespace cuda_agent::llm {

class ReplayClient : public LlmClient {
 public:
  explicit ReplayClient(std::vector<Message> replies) : replies_(std::move(replies)) {}
  /// The assistant messages of a trajectory record (agent/trajectory.h). A record with none is
  /// InvalidArgument.
  static Status from_trajectory(const nlohmann::json& record, std::vector<Message>* replies);

  Status complete(const ChatRequest& request, ChatResponse* response, CallInfo* info) override;
  std::size_t replayed() const { return next_; }

 private:
  std::vector<Message> replies_;
  std::size_t next_ = 0;
};

}  // namespace cuda_agent::llm
