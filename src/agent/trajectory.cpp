#include "agent/trajectory.h"

#include <ctime>
#include <sstream>

#include "agent/tool.h"
#include "util/text.h"

namespace cuda_agent::agent {

using nlohmann::json;

namespace {

json turn_json(const Turn& turn) {
  json t = {{"turn", turn.number},
            {"model_seconds", turn.model_seconds},
            {"attempts", turn.attempts},
            {"retries", turn.retries},
            {"finish_reason", turn.finish_reason},
            {"calls_from_text", turn.calls_from_text},
            {"notes", turn.notes},
            {"tool_calls", json::array()}};
  t["usage"] = turn.usage ? turn.usage->to_json() : json(nullptr);
  for (const ToolEvent& e : turn.tools) {
    t["tool_calls"].push_back({{"id", e.call_id},
                               {"name", e.name},
                               {"arguments", e.arguments},
                               {"output", e.output},
                               {"error", e.error},
                               {"seconds", e.seconds}});
  }
  return t;
}

std::string seconds_text(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", s);
  return text;
}

std::string indent(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) out += prefix + line + "\n";
  return out;
}

std::string evaluation_line(const json& e) {
  std::string line = e.value("outcome", "?");
  if (e.contains("reward") && e["reward"].is_number()) {
    line += ", reward " + std::to_string(e["reward"].get<int>());
  }
  if (e.contains("reason") && e["reason"].is_string() && !e["reason"].get<std::string>().empty()) {
    line += ": " + e["reason"].get<std::string>();
  }
  return line;
}

}  // namespace

std::string run_name(long long id) { return "r" + std::to_string(id); }

std::optional<long long> parse_run_name(const std::string& text) {
  return parse_prefixed_id(text, 'r');
}

std::string utc_now() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

json trajectory_record(const Episode& episode, const EpisodeInfo& info) {
  json r = {
      {"schema", kTrajectorySchema},
      {"policy", info.policy},
      {"model", info.model},
      {"endpoint", info.endpoint},
      {"task", info.task},
      {"device", info.device},
      {"workspace", info.workspace},
      {"started_at", info.started_at},
      {"seconds", episode.seconds},
      {"ending", {{"reason", ending_name(episode.ending)}, {"detail", episode.ending_detail}}},
      {"tools", info.tools},
      {"tokens", episode.tokens.to_json()},
      {"turns", json::array()},
      {"messages", json::array()},
      {"evaluations", info.evaluations}};
  for (const Turn& t : episode.turns) r["turns"].push_back(turn_json(t));
  for (const llm::Message& m : episode.messages) {
    json j = m.to_json();
    if (!m.reasoning.empty()) j["reasoning_content"] = m.reasoning;
    r["messages"].push_back(std::move(j));
  }
  r["final"] = info.final_evaluation;
  if (info.final_evaluation.is_object() && info.final_evaluation.contains("reward")) {
    r["reward"] = info.final_evaluation["reward"];
  } else {
    r["reward"] = nullptr;
  }
  return r;
}

std::string format_trajectory(const json& r) {
  std::ostringstream out;
  const json& task = r.value("task", json::object());
  out << "run " << (r.contains("id") ? run_name(r["id"].get<long long>()) : "?") << ": "
      << task.value("id", "?") << " on " << r.value("device", "?") << " by "
      << r.value("policy", "?");
  if (!r.value("model", "").empty()) out << " (" << r.value("model", "") << ")";
  out << "\n  started " << r.value("started_at", "?") << ", "
      << seconds_text(r.value("seconds", 0.0)) << ", " << r.value("turns", json::array()).size()
      << " turns";
  const json& tokens = r.value("tokens", json::object());
  out << ", " << tokens.value("prompt_tokens", 0LL) << " prompt and "
      << tokens.value("completion_tokens", 0LL) << " completion tokens\n";
  out << "  workspace " << r.value("workspace", "?") << "\n\n";

  // The conversation, with the task's message and the system prompt summarised.
  std::size_t turn = 0;
  const json& turns = r.value("turns", json::array());
  for (const json& m : r.value("messages", json::array())) {
    const std::string role = m.value("role", "");
    const std::string content =
        m.contains("content") && m["content"].is_string() ? m["content"].get<std::string>() : "";
    if (role == "system") {
      out << "[system] " << content.size() << " characters (the skill and the rules)\n";
    } else if (role == "user") {
      out << "[user]\n" << indent(cut_for_model(content, 1200), "  ");
    } else if (role == "assistant") {
      ++turn;
      out << "\n[turn " << turn << "]";
      if (turn <= turns.size()) {
        const json& t = turns[turn - 1];
        out << " " << seconds_text(t.value("model_seconds", 0.0));
        if (t.value("attempts", 1) > 1) out << ", " << t.value("attempts", 1) << " attempts";
        if (t.value("calls_from_text", false)) out << ", calls read from text";
        for (const json& note : t.value("notes", json::array())) {
          out << "\n  note: " << note.get<std::string>();
        }
        for (const json& retry : t.value("retries", json::array())) {
          out << "\n  retried: " << retry.get<std::string>();
        }
      }
      out << "\n";
      if (!content.empty()) out << indent(cut_for_model(content, 1200), "  ");
      for (const json& c : m.value("tool_calls", json::array())) {
        const json& f = c.value("function", json::object());
        out << "  -> " << describe_call(f.value("name", ""), f.value("arguments", "")) << "\n";
      }
    } else if (role == "tool") {
      out << indent(cut_for_model(content, 600), "     | ");
    }
  }
  out << "\n";
  const json& evaluations = r.value("evaluations", json::array());
  if (!evaluations.empty()) {
    out << "evaluations during the episode:\n";
    for (const json& e : evaluations) {
      out << "  " << e.value("stage", "all") << ": " << evaluation_line(e) << "\n";
    }
  }
  const json& ending = r.value("ending", json::object());
  out << "ending: " << ending.value("reason", "?");
  if (!ending.value("detail", "").empty()) out << " (" << ending.value("detail", "") << ")";
  out << "\n";
  const json& final = r.value("final", json());
  if (final.is_object() && final.contains("error")) {
    out << "final evaluation: no verdict: " << final["error"].get<std::string>() << "\n";
  } else if (final.is_object()) {
    out << "final evaluation: " << evaluation_line(final) << "\n";
  } else {
    out << "final evaluation: none (the episode was interrupted)\n";
  }
  return out.str();
}

}  // namespace cuda_agent::agent
