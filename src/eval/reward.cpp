#include "eval/reward.h"

#include <cmath>

namespace cuda_agent {

int discrete_reward(const EvalResult& r) {
  if (!r.passed() || !r.violations.empty()) return -1;
  bool beats_eager = r.speedup_vs_eager && *r.speedup_vs_eager > kSpeedupMargin;
  bool beats_compile = r.speedup_vs_compile && *r.speedup_vs_compile > kSpeedupMargin;
  if (beats_eager && beats_compile) return 3;
  if (beats_eager) return 2;
  return 1;
}

std::optional<double> log_speedup(const EvalResult& r) {
  if (!r.passed() || !r.violations.empty()) return -1.0;
  if (!r.speedup_vs_compile) return std::nullopt;
  return std::log(*r.speedup_vs_compile);
}

Status apply_reward(const std::string& recipe, EvalResult* r) {
  if (r->candidate_us && *r->candidate_us > 0) {
    if (r->eager_us) r->speedup_vs_eager = *r->eager_us / *r->candidate_us;
    if (r->compile_us) r->speedup_vs_compile = *r->compile_us / *r->candidate_us;
  }
  r->log_speedup = log_speedup(*r);
  if (recipe == "discrete") {
    r->reward = discrete_reward(*r);
  } else if (recipe == "log_speedup") {
    // The record's integer reward stays the discrete one; the recipe's value is log_speedup.
    r->reward = discrete_reward(*r);
  } else {
    return Status::InvalidArgument("unknown reward recipe '" + recipe +
                                   "' (known: discrete, log_speedup)");
  }
  r->reward_recipe = recipe;
  return Status::OK();
}

}  // namespace cuda_agent
