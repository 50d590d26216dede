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
}

TEST(Reward, UnknownRecipeIsRefused) {
  EvalResult r = timed(1, 1, 1);
  Status s = apply_reward("vibes", &r);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("discrete"), std::string::npos);
}

}  // namespace
}  // namespace cuda_agent
