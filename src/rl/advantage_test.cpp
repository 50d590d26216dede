#include "rl/advantage.h"

#include <gtest/gtest.h>

#include <cmath>

namespace cuda_agent::rl {
namespace {

TEST(GroupAdvantages, GrpoScoresEachRewardAgainstItsGroupBySampleStandardDeviation) {
  // Rewards 3, 1, -1, 1: mean 1, squared deviations 4 + 0 + 4 + 0 = 8, sample variance 8/3,
  // so the advantages are +-2 / sqrt(8/3) = +-sqrt(1.5) and 0.
  const std::vector<double> a = group_advantages({3, 1, -1, 1}, "grpo");
  ASSERT_EQ(a.size(), 4u);
  EXPECT_NEAR(a[0], std::sqrt(1.5), 1e-6);
  EXPECT_NEAR(a[1], 0, 1e-12);
  EXPECT_NEAR(a[2], -std::sqrt(1.5), 1e-6);
  EXPECT_NEAR(a[3], 0, 1e-12);
  // Two rewards 2 and -1: mean 0.5, sample std sqrt(4.5) = 2.1213, advantages +-0.7071.
  const std::vector<double> b = group_advantages({2, -1}, "grpo");
  EXPECT_NEAR(b[0], 1.5 / std::sqrt(4.5), 1e-6);
  EXPECT_NEAR(b[1], -1.5 / std::sqrt(4.5), 1e-6);
}

TEST(GroupAdvantages, GrpoMeanOnlySubtractsTheMean) {
  const std::vector<double> a = group_advantages({3, 1, -1, 1}, "grpo_mean");
  EXPECT_DOUBLE_EQ(a[0], 2);
  EXPECT_DOUBLE_EQ(a[1], 0);
  EXPECT_DOUBLE_EQ(a[2], -2);
  EXPECT_DOUBLE_EQ(a[3], 0);
}

TEST(GroupAdvantages, AGroupWithNothingToCompareHasNoAdvantage) {
  for (const char* estimator : {"grpo", "grpo_mean"}) {
    EXPECT_EQ(group_advantages({3}, estimator), std::vector<double>{0});
    EXPECT_EQ(group_advantages({2, 2, 2}, estimator), (std::vector<double>{0, 0, 0}));
    EXPECT_TRUE(group_advantages({}, estimator).empty());
  }
  EXPECT_TRUE(check_estimator("grpo").ok());
  Status unknown = check_estimator("reinforce");
  EXPECT_FALSE(unknown.ok());
  EXPECT_NE(unknown.message().find("grpo, grpo_mean"), std::string::npos);
}

TEST(DiscountedReturns, TheRewardArrivesAfterTheLastTurn) {
  EXPECT_EQ(discounted_returns(3, 2, 0.5), (std::vector<double>{0.5, 1, 2}));
  EXPECT_EQ(discounted_returns(2, -1, 1), (std::vector<double>{-1, -1}));
  EXPECT_TRUE(discounted_returns(0, 3, 0.9).empty());
  const std::vector<double> r = discounted_returns(4, 3, 0.99);
  EXPECT_NEAR(r[0], 3 * 0.99 * 0.99 * 0.99, 1e-12);
  EXPECT_DOUBLE_EQ(r[3], 3);
}

}  // namespace
}  // namespace cuda_agent::rl
