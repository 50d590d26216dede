#include "task/filters.h"

#include <gtest/gtest.h>

namespace cuda_agent {
namespace {

using nlohmann::json;

/// What task_check.py writes for a task that passes every filter.
json healthy() {
  return {{"ok", true},
          {"deterministic", true},
          {"repeat_max_abs_diff", 0.0},
          {"matches_zero", false},
          {"matches_constant", false},
          {"same_for_other_draw", false},
          {"insensitive_inputs", json::array()},
          {"has_weights", true},
          {"insensitive_weights", false},
          {"compile_matches", true},
          {"compile_max_abs_diff", 1e-6},
          {"eager_ms", 2.0},
          {"compile_ms", 1.5}};
}

std::vector<std::string> names(const std::vector<DropReason>& reasons) {
  std::vector<std::string> out;
  for (const auto& r : reasons) out.push_back(r.name);
  return out;
}

using Names = std::vector<std::string>;

TEST(Filters, AHealthyTaskIsKept) { EXPECT_TRUE(judge_task(healthy(), {}).empty()); }

TEST(Filters, AFailedStageIsTheOnlyReason) {
  for (auto [stage, reason] :
       {std::pair{"load", "fails_to_load"}, std::pair{"eager", "fails_in_eager"},
        std::pair{"crash", "crashed"}, std::pair{"timeout", "timed_out"}}) {
    json m = {{"ok", false}, {"stage", stage}, {"error", "boom"}};
    auto reasons = judge_task(m, {});
    ASSERT_EQ(names(reasons), Names{reason}) << stage;
    EXPECT_EQ(reasons[0].detail, "boom");
  }
}

TEST(Filters, ARecordWithoutAVerdictIsACrash) {
  EXPECT_EQ(names(judge_task({{"ok", false}}, {})), Names{"crashed"});
}

TEST(Filters, EachDegeneracyHasItsReason) {
  struct Case {
    const char* field;
    json value;
    const char* reason;
  };
  for (const Case& c : {Case{"deterministic", false, "nondeterministic"},
                        Case{"matches_zero", true, "output_near_zero"},
                        Case{"matches_constant", true, "output_constant"},
                        Case{"same_for_other_draw", true, "insensitive_to_input"},
                        Case{"insensitive_inputs", json::array({1}), "insensitive_to_input"},
                        Case{"insensitive_weights", true, "insensitive_to_weights"},
                        Case{"compile_matches", false, "fails_under_compile"}}) {
    json m = healthy();
    m[c.field] = c.value;
    EXPECT_EQ(names(judge_task(m, {})), Names{c.reason}) << c.field;
  }
}

TEST(Filters, NearZeroIsNotAlsoReportedAsConstant) {
  json m = healthy();
  m["matches_zero"] = true;
  m["matches_constant"] = true;
  EXPECT_EQ(names(judge_task(m, {})), Names{"output_near_zero"});
}

TEST(Filters, TheInsensitiveInputIsNamed) {
  json m = healthy();
  m["insensitive_inputs"] = {2};
  auto reasons = judge_task(m, {});
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_NE(reasons[0].detail.find("input 2"), std::string::npos) << reasons[0].detail;
}

TEST(Filters, ACompileErrorAfterEagerChecks) {
  json m = healthy();
  m.erase("compile_matches");
  m["ok"] = false;
  m["stage"] = "compile";
  m["error"] = "BackendCompilerFailed";
  EXPECT_EQ(names(judge_task(m, {})), Names{"fails_under_compile"});
}

TEST(Filters, TheWindowAppliesOnlyWhenAsked) {
  json fast = healthy(), slow = healthy();
  fast["eager_ms"] = 0.1;
  slow["eager_ms"] = 50.0;
  FilterPolicy off;
  EXPECT_TRUE(judge_task(fast, off).empty());
  EXPECT_TRUE(judge_task(slow, off).empty());
  FilterPolicy on{true, 0.5, 20};
  EXPECT_EQ(names(judge_task(fast, on)), Names{"runtime_below_window"});
  EXPECT_EQ(names(judge_task(slow, on)), Names{"runtime_above_window"});
  EXPECT_TRUE(judge_task(healthy(), on).empty());
}

}  // namespace
}  // namespace cuda_agent
