#include "eval/reward.h"

#include <cmath>

namespace cuda_agent {
namespace {

bool broke_a_rule(const EvalResult& r) {
  return r.outcome == Outcome::kViolation || !r.violations.empty();
}

double milestone_reward(const EvalResult& r) {
  if (broke_a_rule(r) || !r.compiled || r.outcome == Outcome::kCompileError) return -1;
  if (!r.passed()) return -0.5;
  double value = discrete_reward(r);
  if (value == 3) {
    for (double milestone : {1.5, 2.0}) {
      if (*r.speedup_vs_compile >= milestone) value += 0.5;
    }
  }
  return value;
}

}  // namespace

const std::vector<RewardRecipe>& reward_recipes() {
  static const std::vector<RewardRecipe> recipes = {
      {"discrete", "the CUDA Agent paper's: -1 failed, 1 correct, 2 beats eager, 3 beats both"},
      {"log_speedup", "ln(torch.compile time / candidate time) when correct, -1 otherwise"},
      {"milestone", "discrete with -0.5 for compiled but wrong, +0.5 at 1.5x and 2x over compile"},
  };
  return recipes;
}

std::string recipe_names() {
  std::string names;
  for (const RewardRecipe& r : reward_recipes()) names += (names.empty() ? "" : ", ") + r.name;
  return names;
}

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

Status check_recipe(const std::string& recipe) {
  for (const RewardRecipe& r : reward_recipes()) {
    if (r.name == recipe) return Status::OK();
  }
  return Status::InvalidArgument("unknown reward recipe '" + recipe +
                                 "' (known: " + recipe_names() + ")");
}

Status recipe_value(const std::string& recipe, const EvalResult& r, double* value) {
  if (recipe == "discrete") {
    *value = discrete_reward(r);
  } else if (recipe == "log_speedup") {
    *value = log_speedup(r).value_or(0.0);
  } else if (recipe == "milestone") {
    *value = milestone_reward(r);
  } else {
    return check_recipe(recipe);
  }
  return Status::OK();
}

Status apply_reward(const std::string& recipe, EvalResult* r) {
  if (r->candidate_us && *r->candidate_us > 0) {
    if (r->eager_us) r->speedup_vs_eager = *r->eager_us / *r->candidate_us;
    if (r->compile_us) r->speedup_vs_compile = *r->compile_us / *r->candidate_us;
  }
  double value = 0;
  if (Status s = recipe_value(recipe, *r, &value); !s.ok()) return s;
  r->log_speedup = log_speedup(*r);
  // The record's integer reward stays the discrete one, whichever recipe was asked for.
  r->reward = discrete_reward(*r);
  r->reward_recipe = recipe;
  r->reward_value = value;
  return Status::OK();
}

}  // namespace cuda_agent
