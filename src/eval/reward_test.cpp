#include "eval/reward.h"

#include <gtest/gtest.h>

#include <cmath>

namespace cuda_agent {
namespace {

EvalResult timed(double eager_us, double compile_us, double candidate_us) {
  EvalResult r;
  r.compiled = r.correct = true;
  r.eager_us = eager_us;
  r.compile_us = compile_us;
  r.candidate_us = candidate_us;
  return r;
}

int reward_of(EvalResult r) {
  EXPECT_TRUE(apply_reward("discrete", &r).ok());
  return *r.reward;
}

TEST(DiscreteReward, FollowsThePapersRecipe) {
  EXPECT_EQ(reward_of(timed(100, 100, 90)), 3);   // 1.11x over both
  EXPECT_EQ(reward_of(timed(100, 80, 90)), 2);    // beats eager, loses to torch.compile
  EXPECT_EQ(reward_of(timed(100, 100, 96)), 1);   // 1.04x: inside the 5% margin
  EXPECT_EQ(reward_of(timed(100, 100, 200)), 1);  // correct but slower
}

TEST(DiscreteReward, TheMarginIsStrict) {
  // Exactly 5% faster is not "more than 5% faster".
  EXPECT_EQ(reward_of(timed(105, 105, 100)), 1);
  EXPECT_EQ(reward_of(timed(105.1, 105.1, 100)), 3);
}

TEST(DiscreteReward, AnyFailureIsMinusOne) {
  for (Outcome o : {Outcome::kCompileError, Outcome::kMismatch, Outcome::kViolation,
                    Outcome::kRuntimeError, Outcome::kCrash, Outcome::kTimeout}) {
    EvalResult r = timed(100, 100, 10);
    r.outcome = o;
    EXPECT_EQ(reward_of(r), -1) << outcome_name(o);
  }
  EvalResult violated = timed(100, 100, 10);
  violated.violations.push_back({"torch_compute_op", "aten::add"});
  EXPECT_EQ(reward_of(violated), -1);
}

TEST(DiscreteReward, MissingCompileBaselineCapsAtTwo) {
  EvalResult r = timed(100, 100, 50);
  r.compile_us.reset();
  EXPECT_EQ(reward_of(r), 2);
}

TEST(Reward, SpeedupsAndLogSpeedupAreRecorded) {
  EvalResult r = timed(300, 200, 100);
  ASSERT_TRUE(apply_reward("log_speedup", &r).ok());
  EXPECT_DOUBLE_EQ(*r.speedup_vs_eager, 3.0);
  EXPECT_DOUBLE_EQ(*r.speedup_vs_compile, 2.0);
  EXPECT_NEAR(*r.log_speedup, std::log(2.0), 1e-12);
  EXPECT_EQ(r.reward_recipe, "log_speedup");
  EXPECT_NEAR(*r.reward_value, std::log(2.0), 1e-12);
  EXPECT_EQ(*r.reward, 3);  // the record's integer reward is the discrete one
}

double value_of(const std::string& recipe, EvalResult r) {
  EXPECT_TRUE(apply_reward(recipe, &r).ok());
  return *r.reward_value;
}

TEST(MilestoneReward, GivesPartialCreditBelowAndAboveTheDiscreteSteps) {
  EXPECT_DOUBLE_EQ(value_of("milestone", timed(100, 100, 200)), 1);    // correct, slower
  EXPECT_DOUBLE_EQ(value_of("milestone", timed(100, 80, 90)), 2);      // beats eager only
  EXPECT_DOUBLE_EQ(value_of("milestone", timed(100, 100, 90)), 3);     // 1.11x over both
  EXPECT_DOUBLE_EQ(value_of("milestone", timed(150, 150, 100)), 3.5);  // 1.5x over compile
  EXPECT_DOUBLE_EQ(value_of("milestone", timed(300, 300, 100)), 4);    // 3x: capped at 2x's
  EvalResult wrong = timed(100, 100, 50);
  wrong.outcome = Outcome::kMismatch;
  EXPECT_DOUBLE_EQ(value_of("milestone", wrong), -0.5);
  EvalResult hung = wrong;
  hung.outcome = Outcome::kTimeout;
  EXPECT_DOUBLE_EQ(value_of("milestone", hung), -0.5);
  EvalResult unbuilt = timed(100, 100, 50);
  unbuilt.compiled = false;
  unbuilt.outcome = Outcome::kCompileError;
  EXPECT_DOUBLE_EQ(value_of("milestone", unbuilt), -1);
}

TEST(RewardRecipes, ABrokenRuleScoresTheLeastWhateverTheRecipe) {
  for (const RewardRecipe& recipe : reward_recipes()) {
    EvalResult caught = timed(300, 300, 10);  // a fast "candidate" that broke a rule
    caught.outcome = Outcome::kViolation;
    caught.violations.push_back({"torch_compute_op", "aten::add"});
    EvalResult unbuilt = timed(100, 100, 50);
    unbuilt.compiled = false;
    unbuilt.outcome = Outcome::kCompileError;
    EXPECT_DOUBLE_EQ(value_of(recipe.name, caught), -1) << recipe.name;
    EXPECT_LE(value_of(recipe.name, caught), value_of(recipe.name, unbuilt)) << recipe.name;
    // A violation the outcome missed still costs everything.
    EvalResult flagged = timed(300, 300, 10);
    flagged.violations.push_back({"precision_changed", "TF32"});
    EXPECT_DOUBLE_EQ(value_of(recipe.name, flagged), -1) << recipe.name;
  }
}

TEST(Reward, UnknownRecipeIsRefused) {
  EvalResult r = timed(1, 1, 1);
  Status s = apply_reward("vibes", &r);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("discrete, log_speedup, milestone"), std::string::npos);
  double value = 0;
  EXPECT_FALSE(recipe_value("vibes", r, &value).ok());
}

}  // namespace
}  // namespace cuda_agent
