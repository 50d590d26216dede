#include "task/filters.h"

#include <cstdio>

namespace cuda_agent {
namespace {

std::string ms(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3g ms", value);
  return buffer;
}

bool flag(const nlohmann::json& m, const char* key) {
  auto it = m.find(key);
  return it != m.end() && it->is_boolean() && it->get<bool>();
}

std::string error_of(const nlohmann::json& m) { return m.value("error", std::string("no error")); }

}  // namespace

std::vector<DropReason> judge_task(const nlohmann::json& m, const FilterPolicy& policy) {
  std::vector<DropReason> reasons;
  const std::string stage = m.value("stage", std::string());
  if (stage == "crash") return {{"crashed", error_of(m)}};
  if (stage == "timeout") return {{"timed_out", error_of(m)}};
  if (stage == "load") return {{"fails_to_load", error_of(m)}};
  if (stage == "eager") return {{"fails_in_eager", error_of(m)}};
  if (!m.value("ok", false) && stage.empty()) {
    return {{"crashed", "the checker left no verdict: " + error_of(m)}};
  }

  if (m.contains("deterministic") && !flag(m, "deterministic")) {
    std::string diff = m.contains("repeat_max_abs_diff") ? m["repeat_max_abs_diff"].dump() : "?";
    reasons.push_back({"nondeterministic", "two calls on the same inputs differ by up to " + diff});
  }
  if (flag(m, "matches_zero")) {
    reasons.push_back({"output_near_zero",
                       "an all-zero output passes the comparison: a kernel that computes "
                       "nothing would be accepted"});
  } else if (flag(m, "matches_constant")) {
    reasons.push_back({"output_constant",
                       "one constant per output passes the comparison: the output hardly varies"});
  }
  if (flag(m, "same_for_other_draw")) {
    reasons.push_back({"insensitive_to_input",
                       "another draw of get_inputs() gives the same outputs within tolerance"});
  } else if (m.contains("insensitive_inputs") && m["insensitive_inputs"].is_array() &&
             !m["insensitive_inputs"].empty()) {
    std::string list;
    for (const auto& i : m["insensitive_inputs"]) list += (list.empty() ? "" : ", ") + i.dump();
    reasons.push_back(
        {"insensitive_to_input", "changing input " + list + " alone leaves the outputs the same"});
  }
  if (flag(m, "insensitive_weights")) {
    reasons.push_back(
        {"insensitive_to_weights", "perturbing every weight leaves the outputs the same"});
  }
  if (stage == "degeneracy" || stage == "repeat") {
    reasons.push_back({"fails_in_eager", error_of(m)});
  }
  if (stage == "compile") {
    reasons.push_back({"fails_under_compile", error_of(m)});
  } else if (m.contains("compile_matches") && !flag(m, "compile_matches")) {
    std::string diff = m.contains("compile_max_abs_diff") ? m["compile_max_abs_diff"].dump() : "?";
    reasons.push_back(
        {"fails_under_compile", "torch.compile's outputs differ from eager's by up to " + diff});
  }
  if (stage == "timing") reasons.push_back({"fails_in_eager", error_of(m)});
  if (policy.check_window && m.contains("eager_ms") && m["eager_ms"].is_number()) {
    double eager = m["eager_ms"].get<double>();
    if (eager < policy.window_min_ms) {
      reasons.push_back({"runtime_below_window",
                         "eager takes " + ms(eager) + ", below " + ms(policy.window_min_ms)});
    } else if (eager > policy.window_max_ms) {
      reasons.push_back({"runtime_above_window",
                         "eager takes " + ms(eager) + ", above " + ms(policy.window_max_ms)});
    }
  }
  return reasons;
}

}  // namespace cuda_agent
