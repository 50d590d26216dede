#include "rl/export.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "agent/tool.h"
#include "agent/trajectory.h"
#include "eval/result.h"
#include "eval/reward.h"
#include "rl/advantage.h"
#include "sandbox/process_runner.h"
#include "util/files.h"
#include "util/hash.h"
#include "util/text.h"

namespace cuda_agent::rl {
namespace {

using json = nlohmann::json;

int assistant_turns(const json& messages) {
  int turns = 0;
  for (const json& m : messages) turns += m.value("role", "") == "assistant" ? 1 : 0;
  return turns;
}

/// What a warm-up duplicate is: the same task answered with the same assistant turns.
std::string behaviour_key(const json& trajectory) {
  json said = json::array();
  for (const json& m : trajectory.value("messages", json::array())) {
    if (m.value("role", "") == "assistant") said.push_back(m);
  }
  return sha256_hex(trajectory.value("task", json::object()).value("id", "") + "\n" + said.dump());
}

std::string run_key(const json& trajectory) { return agent::run_name(trajectory.value("id", 0LL)); }

}  // namespace

std::optional<double> trajectory_reward(const json& trajectory, const std::string& recipe) {
  const auto final = trajectory.find("final");
  if (final == trajectory.end() || !final->is_object() || !final->contains("outcome")) {
    return std::nullopt;
  }
  const EvalResult result = EvalResult::from_json(*final);
  if (result.outcome == Outcome::kInterrupted || result.outcome == Outcome::kDegenerateTask) {
    return std::nullopt;
  }
  double value = 0;
  if (!recipe_value(recipe, result, &value).ok()) return std::nullopt;
  return value;
}

json trajectory_chat(const json& trajectory) {
  std::set<std::string> offered;
  for (const json& name : trajectory.value("tools", json::array())) {
    if (name.is_string()) offered.insert(name.get<std::string>());
  }
  json tools = json::array();
  for (const json& spec : agent::default_tools().specs()) {
    if (offered.count(spec["function"].value("name", ""))) tools.push_back(spec);
  }
  return {{"messages", trajectory.value("messages", json::array())}, {"tools", tools}};
}

Status build_rollouts(Store* store, const std::vector<report::TaskResult>& results,
                      const RolloutOptions& options, std::vector<json>* records,
                      std::vector<Dropped>* dropped) {
  if (Status s = check_estimator(options.estimator); !s.ok()) return s;
  if (Status s = check_recipe(options.recipe); !s.ok()) return s;
  std::map<std::string, std::vector<const report::TaskResult*>> groups;
  for (const report::TaskResult& r : results) groups[r.task].push_back(&r);
  records->clear();
  dropped->clear();
  for (auto& [task, members] : groups) {
    std::sort(members.begin(), members.end(),
              [](const auto* a, const auto* b) { return a->sample < b->sample; });
    std::vector<json> group;
    std::vector<double> rewards;
    for (const report::TaskResult* r : members) {
      const std::optional<long long> run = agent::parse_run_name(r->run);
      if (!run) {
        dropped->push_back(
            {r->key(), "no trajectory: " + (r->reason.empty() ? r->outcome : r->reason)});
        continue;
      }
      json trajectory;
      if (Status s = store->get_trajectory(*run, &trajectory); !s.ok()) {
        dropped->push_back({r->key(), s.message()});
        continue;
      }
      const std::optional<double> reward = trajectory_reward(trajectory, options.recipe);
      if (!reward) {
        dropped->push_back({r->key(), "no verdict: " + r->outcome});
        continue;
      }
      const json chat = trajectory_chat(trajectory);
      json record = {{"schema", "cuda-agent.rollout/1"},
                     {"task", task},
                     {"sample", std::max(r->sample, 0)},
                     {"group_size", static_cast<int>(members.size())},
                     {"run", r->run},
                     {"policy", trajectory.value("policy", "")},
                     {"model", trajectory.value("model", "")},
                     {"outcome", r->outcome},
                     {"recipe", options.recipe},
                     {"reward", *reward},
                     {"estimator", options.estimator},
                     {"gamma", options.gamma},
                     {"returns", discounted_returns(assistant_turns(chat["messages"]), *reward,
                                                    options.gamma)},
                     {"speedup_vs_eager", nullptr},
                     {"speedup_vs_compile", nullptr},
                     {"messages", chat["messages"]},
                     {"tools", chat["tools"]}};
      if (r->speedup_vs_eager) record["speedup_vs_eager"] = *r->speedup_vs_eager;
      if (r->speedup_vs_compile) record["speedup_vs_compile"] = *r->speedup_vs_compile;
      rewards.push_back(*reward);
      group.push_back(std::move(record));
    }
    const std::vector<double> advantages = group_advantages(rewards, options.estimator);
    for (std::size_t i = 0; i < group.size(); ++i) {
      group[i]["advantage"] = advantages[i];
      group[i]["group_size"] = static_cast<int>(group.size());
      records->push_back(std::move(group[i]));
    }
  }
  return Status::OK();
}

std::string format_rollout_summary(const std::vector<json>& records,
                                   const std::vector<Dropped>& dropped,
                                   const RolloutOptions& options) {
  std::map<std::string, std::set<double>> rewards;
  double sum = 0;
  for (const json& r : records) {
    rewards[r.value("task", "")].insert(r.value("reward", 0.0));
    sum += r.value("reward", 0.0);
  }
  int flat = 0;
  for (const auto& [task, distinct] : rewards) flat += distinct.size() == 1 ? 1 : 0;
  char text[400];
  std::snprintf(text, sizeof text,
                "rollouts: %zu episodes in %zu groups; mean reward %.3f (%s); advantages %s; "
                "%d group(s) scored alike (no signal); returns with gamma %.3g\n",
                records.size(), rewards.size(), records.empty() ? 0.0 : sum / records.size(),
                options.recipe.c_str(), options.estimator.c_str(), flat, options.gamma);
  std::string out = text;
  if (!dropped.empty()) {
    out += "left out (" + std::to_string(dropped.size()) + "):\n";
    for (const Dropped& d : dropped) out += "  " + d.key + ": " + d.why + "\n";
  }
  return out;
}

std::vector<json> select_warmup(const std::vector<json>& trajectories, const WarmupOptions& options,
                                WarmupCounts* counts) {
  *counts = WarmupCounts{};
  struct Kept {
    double reward;
    long long id;
    const json* trajectory;
  };
  std::map<std::string, std::vector<Kept>> by_task;
  std::set<std::string> seen;
  for (const json& t : trajectories) {
    ++counts->considered;
    const std::optional<double> reward = trajectory_reward(t, options.recipe);
    if (!reward) {
      ++counts->no_verdict;
      continue;
    }
    if (*reward < options.min_reward) {
      ++counts->below;
      continue;
    }
    if (!seen.insert(behaviour_key(t)).second) {
      ++counts->duplicates;
      continue;
    }
    by_task[t.value("task", json::object()).value("id", "")].push_back(
        {*reward, t.value("id", 0LL), &t});
  }
  std::vector<json> records;
  for (auto& [task, kept] : by_task) {
    std::sort(kept.begin(), kept.end(), [](const Kept& a, const Kept& b) {
      return a.reward != b.reward ? a.reward > b.reward : a.id < b.id;
    });
    for (std::size_t i = 0; i < kept.size(); ++i) {
      if (static_cast<int>(i) >= options.per_task) {
        ++counts->over_cap;
        continue;
      }
      const json chat = trajectory_chat(*kept[i].trajectory);
      records.push_back({{"schema", "cuda-agent.sft/1"},
                         {"task", task},
                         {"run", run_key(*kept[i].trajectory)},
                         {"policy", kept[i].trajectory->value("policy", "")},
                         {"recipe", options.recipe},
                         {"reward", kept[i].reward},
                         {"messages", chat["messages"]},
                         {"tools", chat["tools"]}});
      ++counts->kept;
    }
  }
  return records;
}

json prompt_record(const std::string& task_id, const std::string& system, const std::string& user,
                   const std::string& device, int shrink, int index) {
  return {{"data_source", "cuda-agent"},
          {"prompt", json::array({{{"role", "system"}, {"content", system}},
                                  {{"role", "user"}, {"content", user}}})},
          {"ability", "cuda-kernels"},
          {"reward_model", {{"style", "rule"}, {"ground_truth", task_id}}},
          {"extra_info",
           {{"task", task_id}, {"device", device}, {"shrink", shrink}, {"index", index}}}};
}

Status write_records(const std::vector<json>& records, const std::filesystem::path& path,
                     const std::string& python, const std::filesystem::path& parquet_script) {
  std::string lines;
  for (const json& r : records) lines += r.dump() + "\n";
  if (path.extension() != ".parquet") return write_file_atomic(path, lines);
  const std::filesystem::path staged = path.string() + ".jsonl.part";
  if (Status s = write_file_atomic(staged, lines); !s.ok()) return s;
  ProcessSpec spec;
  spec.argv = {python, parquet_script.string(), staged.string(), path.string()};
  spec.isolate_network = false;
  spec.timeout_s = 600;
  spec.stderr_path = path.string() + ".log.part";
  PosixProcessRunner runner;
  const ProcessResult r = runner.run(spec);
  std::string err;
  (void)read_file(spec.stderr_path, &err);
  std::error_code ignored;
  std::filesystem::remove(staged, ignored);
  std::filesystem::remove(spec.stderr_path, ignored);
  if (!r.succeeded()) {
    return Status::Internal("writing " + path.string() + " as Parquet: " + r.describe() +
                            (err.empty() ? "" : ": " + trim(last_line(err))));
  }
  return Status::OK();
}

}  // namespace cuda_agent::rl
