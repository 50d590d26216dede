#include "task/synth.h"

#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "task/op_library.h"
#include "task/task.h"

namespace cuda_agent {
namespace {

std::vector<SynthTask> synthesize(const SynthOptions& options) {
  std::vector<SynthTask> tasks;
  Status s = synthesize_tasks(options, &tasks);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return tasks;
}

SynthOptions options_for(std::uint64_t seed, int count, int min_ops = 2, int max_ops = 5) {
  SynthOptions options;
  options.seed = seed;
  options.count = count;
  options.min_ops = min_ops;
  options.max_ops = max_ops;
  return options;
}

/// The names inside a Python tuple or list literal that follows `head` in source.
std::vector<std::string> names_after(const std::string& source, const std::string& head) {
  std::size_t at = source.find(head);
  if (at == std::string::npos) return {};
  std::size_t end = source.find_first_of(")]", at + head.size());
  std::string inside = source.substr(at + head.size(), end - at - head.size());
  std::vector<std::string> names;
  std::regex name(R"([A-Za-z_][A-Za-z_0-9]*)");
  for (auto it = std::sregex_iterator(inside.begin(), inside.end(), name);
       it != std::sregex_iterator(); ++it) {
    names.push_back(it->str());
  }
  return names;
}

TEST(Synth, SameSeedGivesByteIdenticalTasks) {
  std::vector<SynthTask> a = synthesize(options_for(7, 25));
  std::vector<SynthTask> b = synthesize(options_for(7, 25));
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].id, b[i].id);
    EXPECT_EQ(a[i].source, b[i].source);
    EXPECT_EQ(a[i].ops, b[i].ops);
  }
}

TEST(Synth, TaskIsTheSameWhateverTheCount) {
  std::vector<SynthTask> few = synthesize(options_for(3, 5));
  std::vector<SynthTask> more = synthesize(options_for(3, 12));
  ASSERT_EQ(few.size(), 5u);
  for (std::size_t i = 0; i < few.size(); ++i) EXPECT_EQ(few[i].source, more[i].source);
}

TEST(Synth, DifferentSeedsGiveDifferentTasks) {
  std::vector<SynthTask> a = synthesize(options_for(1, 20));
  std::vector<SynthTask> b = synthesize(options_for(2, 20));
  std::set<std::string> sources;
  for (const SynthTask& t : a) sources.insert(t.source);
  int shared = 0;
  for (const SynthTask& t : b) shared += static_cast<int>(sources.count(t.source));
  EXPECT_LT(shared, 3);
  EXPECT_EQ(a[0].id, "synth_s1_0000");
  EXPECT_EQ(b[0].id, "synth_s2_0000");
}

TEST(Synth, HonoursCountWithDistinctIdsAndSources) {
  std::vector<SynthTask> tasks = synthesize(options_for(11, 120));
  ASSERT_EQ(tasks.size(), 120u);
  std::set<std::string> ids, sources;
  for (const SynthTask& t : tasks) {
    ids.insert(t.id);
    sources.insert(t.source);
  }
  EXPECT_EQ(ids.size(), tasks.size());
  EXPECT_EQ(sources.size(), tasks.size());
}

TEST(Synth, EverySourcePassesTheTaskCheck) {
  for (std::uint64_t seed : {0u, 5u, 99u}) {
    for (const SynthTask& t : synthesize(options_for(seed, 40, 1, 8))) {
      Status s = check_task_source(t.source, t.id + ".py");
      EXPECT_TRUE(s.ok()) << s.ToString() << "\n" << t.source;
    }
  }
}

TEST(Synth, HonoursMinAndMaxOps) {
  for (const SynthTask& t : synthesize(options_for(4, 30, 3, 3))) EXPECT_EQ(t.ops.size(), 3u);
  std::set<std::size_t> lengths;
  for (const SynthTask& t : synthesize(options_for(4, 60, 1, 6))) {
    EXPECT_GE(t.ops.size(), 1u);
    EXPECT_LE(t.ops.size(), 6u);
    lengths.insert(t.ops.size());
  }
  EXPECT_GE(lengths.size(), 4u) << "lengths should spread over the range";
}

TEST(Synth, RejectsOptionsOutOfRange) {
  std::vector<SynthTask> tasks;
  for (SynthOptions bad :
       {options_for(0, 0), options_for(0, -3), options_for(0, 5, 0, 3), options_for(0, 5, 4, 2),
        options_for(0, 5, 1, kMaxSynthOps + 1), options_for(0, kMaxSynthCount + 1)}) {
    Status s = synthesize_tasks(bad, &tasks);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("synth"), std::string::npos) << s.message();
    EXPECT_TRUE(tasks.empty());
  }
}

TEST(Synth, ReportsAnExhaustedSpace) {
  // Single operators on the input sizes make a few thousand tasks, far short of the count; a
  // short fruitless run keeps the test quick.
  SynthOptions options = options_for(0, kMaxSynthCount, 1, 1);
  options.max_fruitless_draws = 300;
  std::vector<SynthTask> tasks;
  Status s = synthesize_tasks(options, &tasks);
  ASSERT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("exhausted"), std::string::npos) << s.message();
  EXPECT_TRUE(tasks.empty());
}

TEST(Synth, ComposesEveryOperatorOfTheLibrary) {
  std::map<std::string, int> used;
  for (std::uint64_t seed = 0; seed < 4; ++seed) {
    for (const SynthTask& t : synthesize(options_for(seed, 100, 1, 6))) {
      for (const std::string& op : t.ops) ++used[op];
    }
  }
  EXPECT_GE(task_synth::op_library().size(), 25u);
  for (const task_synth::OpSpec& op : task_synth::op_library()) {
    EXPECT_GT(used[op.name], 0) << op.name << " never drawn";
  }
}

TEST(Synth, ScalableSizesAreNeverWeightSizes) {
  for (const SynthTask& t : synthesize(options_for(21, 80, 1, 8))) {
    std::vector<std::string> scalable = names_after(t.source, "SCALABLE_SIZES = (");
    std::vector<std::string> init = names_after(t.source, "def get_init_inputs():\n    return [");
    ASSERT_FALSE(scalable.empty()) << t.source;
    EXPECT_EQ(scalable[0], "batch") << t.source;
    for (const std::string& name : scalable) {
      EXPECT_EQ(std::count(init.begin(), init.end(), name), 0) << name << "\n" << t.source;
    }
  }
}

TEST(Synth, ForwardIsDeterministicFp32) {
  for (const SynthTask& t : synthesize(options_for(8, 60, 1, 8))) {
    std::size_t forward = t.source.find("def forward");
    std::size_t end = t.source.find("\n\n\n", forward);
    std::string body = t.source.substr(forward, end - forward);
    for (const char* banned : {"rand", "dropout", "dtype", "half", "bfloat16"}) {
      EXPECT_EQ(body.find(banned), std::string::npos) << banned << "\n" << t.source;
    }
  }
}

}  // namespace
}  // namespace cuda_agent
