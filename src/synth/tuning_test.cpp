#include "synth/tuning.h"

#include <gtest/gtest.h>

namespace cuda_agent::synth {
namespace {

TEST(SynthTuning, WithConfigSetsOnlyTheConfigLine) {
  const std::string model = "lib = load()\n" + model_config_source("fused_rows") +
                            "\nclass ModelNew:\n    CONFIGURED = 1\n";
  const std::string tuned = with_config(model, 102);
  EXPECT_NE(tuned.find("\nCONFIG = 102  # the kernel's launch"), std::string::npos) << tuned;
  EXPECT_EQ(tuned.find("CONFIG = -1"), std::string::npos);
  EXPECT_NE(tuned.find("fused_rows_config(CONFIG)\n"), std::string::npos);
  EXPECT_NE(tuned.find("CONFIGURED = 1"), std::string::npos);
  EXPECT_EQ(with_config(tuned, -1), model);
  // The configuration chosen reads back, and its line is the text with_config wrote.
  EXPECT_EQ(config_of(tuned), 102);
  EXPECT_EQ(config_of(model), -1);
  EXPECT_EQ(config_of("no line here\n"), std::nullopt);
  EXPECT_NE(tuned.find(config_text(102)), std::string::npos);
}

TEST(SynthTuning, SizesFallInPowerOfTwoClasses) {
  EXPECT_EQ(size_class(1), "2^0");
  EXPECT_EQ(size_class(3000), "2^12");
  EXPECT_EQ(size_class(4096), "2^12");
  EXPECT_EQ(size_class(4097), "2^13");
}

TEST(SynthTuning, TheCpuConfigsAreDistinctSchedulesTheLibrarySets) {
  const auto configs = cpu_schedules();
  ASSERT_GE(configs.size(), 2u);
  const std::string source = cpu_config_source("fused_rows");
  for (const KernelConfig& c : configs) {
    if (c.id > 0) {
      EXPECT_NE(source.find("case " + std::to_string(c.id) + ": omp_set_schedule"),
                std::string::npos)
          << c.label;
    }
  }
  EXPECT_NE(source.find("extern \"C\" int fused_rows_config(int64_t config)"), std::string::npos);
}

}  // namespace
}  // namespace cuda_agent::synth
