/// A trajectory: one episode of a policy as a JSON record, the unit that the run store keeps,
/// `cuda-agent show rN` prints, and RL exports read. It holds the whole conversation (every
/// message, tool call and result, never cut), each turn's timings, retries and tokens, every
/// evaluation run during the episode, and the final evaluation with its reward.
///
///   {"schema": "cuda-agent.trajectory.v1", "policy", "model", "endpoint", "task": {id, path,
///    sha256}, "device", "workspace", "started_at", "seconds", "ending": {"reason", "detail"},
///    "tools": [names], "tokens": usage, "turns": [...], "messages": [...],
///    "evaluations": [in-episode records], "final": record, "reward"}
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "agent/loop.h"

namespace cuda_agent::agent {

inline constexpr char kTrajectorySchema[] = "cuda-agent.trajectory.v1";

struct EpisodeInfo {
  std::string policy = "llm";
  std::string model;
  std::string endpoint;
  nlohmann::json task = nlohmann::json::object();  // {"id", "path", "sha256"}
  std::string device;
  std::string workspace;
  std::string started_at;  // ISO 8601, UTC
  std::vector<std::string> tools;
  std::vector<nlohmann::json> evaluations;  // run by the model's own commands
  nlohmann::json final_evaluation;          // the fresh evaluation after the loop
};

nlohmann::json trajectory_record(const Episode& episode, const EpisodeInfo& info);

/// The record for a person: the header, each turn with its calls and (cut) results, the
/// evaluations and the ending.
std::string format_trajectory(const nlohmann::json& record);

/// A run's name as people type it: "r3" for the trajectory filed under id 3.
std::string run_name(long long id);
/// The id a run's name gives ("r3" -> 3); empty when text is not "r" and digits.
std::optional<long long> parse_run_name(const std::string& text);

/// Now, as ISO 8601 in UTC.
std::string utc_now();

}  // namespace cuda_agent::agent
