#include "task/value_sketch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace cuda_agent {
namespace task_synth {
namespace {

TEST(SynthValueSketch, NormalHasTheNormalQuantiles) {
  Values v = Values::normal(0, 1);
  ASSERT_EQ(v.samples.size(), static_cast<std::size_t>(Values::kSamples));
  EXPECT_TRUE(std::is_sorted(v.samples.begin(), v.samples.end()));
  EXPECT_NEAR(v.mean(), 0, 1e-12);
  EXPECT_NEAR(v.spread(), 1, 0.01);
  EXPECT_NEAR(v.quantile(0.5), 0, 1e-9);
  EXPECT_NEAR(v.quantile(0.975), 1.959964, 2e-3);
  EXPECT_NEAR(v.interquartile(), 1.348980, 2e-3);
  // Past the outer samples the tail continues along the normal scale.
  EXPECT_NEAR(v.quantile(0.999), 3.090232, 1e-4);
  EXPECT_NEAR(v.quantile(0.001), -3.090232, 1e-4);

  Values shifted = Values::normal(3, 2, /*noise_share=*/0.5);
  EXPECT_NEAR(shifted.quantile(0.975), 3 + 2 * 1.959964, 4e-3);
  EXPECT_NEAR(shifted.noise(), 0.5 * shifted.spread(), 1e-12);
}

TEST(SynthValueSketch, MaxOfMoreValuesIsLargerAndNarrower) {
  Values v = Values::normal(0, 1);
  Values one = max_of(v, 1);
  for (int i = 0; i < Values::kSamples; ++i) EXPECT_NEAR(one.samples[i], v.samples[i], 1e-9);
  double median = one.median(), spread = one.spread();
  for (double n : {2.0, 4.0, 16.0, 64.0, 1000.0}) {
    Values m = max_of(v, n);
    EXPECT_TRUE(std::is_sorted(m.samples.begin(), m.samples.end())) << n;
    EXPECT_GT(m.median(), median) << n;
    EXPECT_LT(m.spread(), spread) << n;
    median = m.median();
    spread = m.spread();
  }
  // The median of the max of 16 standard normals is the normal quantile at 0.5^(1/16).
  EXPECT_NEAR(max_of(v, 16).median(), 1.7249, 0.01);
}

TEST(SynthValueSketch, MapKeepsBoundsThatTheTailsRespect) {
  Values v = Values::normal(0, 1);
  Values relu = map_values(v, [](double x) { return std::max(0.0, x); });
  EXPECT_EQ(relu.lower, 0);
  EXPECT_EQ(relu.quantile(0.001), 0);
  EXPECT_NEAR(pile_share(relu, /*top=*/false), 0.5, 0.01);
  EXPECT_EQ(pile_share(relu, /*top=*/true), 0);
  EXPECT_NEAR(relu.fraction_near(0), 0.5, 0.02);

  Values clamped = map_values(v, [](double x) { return std::clamp(x, -1.0, 1.0); });
  EXPECT_EQ(clamped.lower, -1);
  EXPECT_EQ(clamped.upper, 1);
  EXPECT_EQ(clamped.quantile(0.9999), 1);
  EXPECT_EQ(negated(clamped).lower, -1);
}

TEST(SynthValueSketch, SumsAddMeansAndNoiseLikeIndependentValues) {
  Values v = Values::normal(1, 2);
  for (double n : {8.0, 32.0, 33.0, 100.0}) {  // sampled up to 32 values, by the limit law past it
    Values sum = sum_of(v, n);
    EXPECT_NEAR(sum.mean(), n, 0.05 * n) << n;
    EXPECT_NEAR(sum.spread(), 2 * std::sqrt(n), 0.05 * 2 * std::sqrt(n)) << n;
    EXPECT_EQ(sum.noise_share, 1) << n;
  }
  // A fixed pattern grows n-fold, the noise only sqrt(n)-fold: the noise share falls.
  EXPECT_LT(sum_of(Values::normal(0, 1, /*noise_share=*/0.6), 16).noise_share, 0.6);

  // Only the first term changes with the draw: its noise is all the sum's.
  Values noisy = Values::normal(1, 3), fixed = Values::normal(2, 4, /*noise_share=*/0);
  Values a = add_independent(noisy, fixed);
  EXPECT_NEAR(a.mean(), 3, 0.5);
  EXPECT_NEAR(a.spread(), 5, 0.25);
  EXPECT_NEAR(a.noise(), noisy.noise(), 1e-9);
}

TEST(SynthValueSketch, NeedsNoSeed) {
  Values v = Values::normal(0.5, 1.5, 0.8);
  EXPECT_EQ(sum_of(v, 8).samples, sum_of(v, 8).samples);
  EXPECT_EQ(times_positive_weights(v).samples, times_positive_weights(v).samples);
  EXPECT_EQ(logsumexp_of(v, 16).samples, logsumexp_of(v, 16).samples);
}

}  // namespace
}  // namespace task_synth
}  // namespace cuda_agent
