#include "synth/model_source.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdint>

#include "eval/compiler_test_util.h"

namespace cuda_agent::synth {
namespace {

const char* const kKernels = R"(#include <cstdint>
extern "C" int offsets(const int64_t* x, int64_t* out, int64_t a, int32_t b, void* /*stream*/) {
  out[0] = x[0] + a + b;
  return a < 0 ? 3 : 0;
}
extern "C" int offsets_config(int64_t config) { return (int)config; }
extern "C" int scaled(const float* x, float* y, float s, void* stream) {
  y[0] = x[0] * s;
  return 0;
}
)";

TEST(PackedEntries, AnEntryOfPointersAndIntegersTakesItsArgumentsAsWordsOfOneBuffer) {
  const std::string source = with_packed_entries(kKernels);
  EXPECT_NE(source.find("extern \"C\" int offsets_packed(const int64_t* words)"), std::string::npos)
      << source;
  EXPECT_EQ(source.find("offsets_config_packed"), std::string::npos);  // a setter, not a kernel
  EXPECT_EQ(source.find("scaled_packed"), std::string::npos);          // a float is no 64-bit word
  EXPECT_EQ(with_packed_entries("extern \"C\" int f(float x) { return 0; }\n"),
            "extern \"C\" int f(float x) { return 0; }\n");

  // Built as the evaluator builds kernels/, the packed entry calls the kernel with each word as
  // its parameter: pointers by address, integers (an int32 too) by value, its result returned.
  TempDir dir;
  Status status;
  const CompileReport report =
      cuda_agent::testing::build_cpu_kernel(dir.path(), "offsets.cpp", source, &status);
  ASSERT_TRUE(status.ok()) << status.ToString();
  ASSERT_TRUE(report.ok) << report.error << "\n" << report.log;
  void* library = dlopen(report.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(library, nullptr) << dlerror();
  using Packed = int (*)(const int64_t*);
  const auto packed = reinterpret_cast<Packed>(dlsym(library, "offsets_packed"));
  ASSERT_NE(packed, nullptr);
  EXPECT_EQ(dlsym(library, "scaled_packed"), nullptr);
  const int64_t x = int64_t{1} << 40;
  int64_t out = 0;
  const int64_t words[] = {reinterpret_cast<int64_t>(&x), reinterpret_cast<int64_t>(&out), 5, -7,
                           0};
  EXPECT_EQ(packed(words), 0);
  EXPECT_EQ(out, (int64_t{1} << 40) + 5 - 7);
  const int64_t failing[] = {words[0], words[1], -1, 0, 0};
  EXPECT_EQ(packed(failing), 3);
  dlclose(library);
}

}  // namespace
}  // namespace cuda_agent::synth
