#include "llm/replay_client.h"

namespace cuda_agent::llm {

Status ReplayClient::from_trajectory(const nlohmann::json& record, std::vector<Message>* replies) {
  replies->clear();
  if (!record.is_object() || !record.contains("messages") || !record["messages"].is_array()) {
    return Status::InvalidArgument("the record to replay is not a trajectory: it has no messages");
  }
  for (const nlohmann::json& m : record["messages"]) {
    if (!m.is_object() || m.value("role", "") != "assistant") continue;
    Message message;
    if (Status s = Message::from_json(m, &message); !s.ok()) return s;
    replies->push_back(std::move(message));
  }
  if (replies->empty()) {
    return Status::InvalidArgument("the trajectory to replay has no assistant messages");
  }
  return Status::OK();
}

Status ReplayClient::complete(const ChatRequest&, ChatResponse* response, CallInfo* info) {
  *info = CallInfo{};
  info->attempts = 1;
  response->id = "replay-" + std::to_string(next_ + 1);
  response->usage.reset();
  if (next_ >= replies_.size()) {
    response->message = {"assistant", "the recorded episode ends here", {}, "", ""};
    response->finish_reason = "stop";
    return Status::OK();
  }
  response->message = replies_[next_++];
  response->finish_reason = response->message.tool_calls.empty() ? "stop" : "tool_calls";
  return Status::OK();
}

}  // namespace cuda_agent::llm
