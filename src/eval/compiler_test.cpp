#include "eval/compiler.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>

#include "eval/compiler_test_util.h"
#include "util/files.h"
#include "util/paths.h"

namespace cuda_agent {
namespace {

namespace fs = std::filesystem;

const char* kScaleCpp = R"(#include <cstdint>
extern "C" int scale(const float* x, float* y, int64_t n, float a, void* stream) {
  #pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) y[i] = a * x[i];
  return 0;
}
)";

class CompilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kernels_ = dir_.path() / "kernels";
    fs::create_directories(kernels_);
    options_.device = "cpu";
    options_.cache_dir = dir_.path() / "cache";
    options_.runtime_dir = harness_dir() / "runtime";
  }
  CompileReport build() {
    CompileReport report;
    Status s = compile_kernels(kernels_, options_, &runner_, &report);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return report;
  }
  TempDir dir_;
  fs::path kernels_;
  CompileOptions options_;
  PosixProcessRunner runner_;
};

TEST_F(CompilerTest, BuildsALibraryAndReusesItWhenNothingChanged) {
  ASSERT_TRUE(write_file_atomic(kernels_ / "scale.cpp", kScaleCpp).ok());
  CompileReport first = build();
  ASSERT_TRUE(first.ok) << first.error << "\n" << first.log;
  EXPECT_FALSE(first.cached);
  EXPECT_EQ(first.objects_built, 2);  // the source and the fixed runtime
  EXPECT_TRUE(fs::is_regular_file(first.library));

  CompileReport second = build();
  ASSERT_TRUE(second.ok);
  EXPECT_TRUE(second.cached);
  EXPECT_EQ(second.objects_built, 0);
  EXPECT_EQ(second.library, first.library);
}

// A loop of selects (a leaky relu, then a clamp), as the synthesizer writes them for the CPU.
const char* kClampCpp = R"(#include <cstdint>
extern "C" int leaky_clamp(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  #pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i] > 0.0f ? x[i] : x[i] * 0.1f;
    y[i] = v > 2.0f ? 2.0f : (v < -0.5f ? -0.5f : v);
  }
  return 0;
}
)";

TEST_F(CompilerTest, ALoopOfSelectsBuildsAsVectorInstructions) {
  // GCC keeps a select of a product scalar (a compare and a branch an element, many times slower
  // on random signs) unless told that no floating-point trap is watched for.
  ASSERT_TRUE(write_file_atomic(kernels_ / "clamp.cpp", kClampCpp).ok());
  CompileReport report = build();
  ASSERT_TRUE(report.ok) << report.error << "\n" << report.log;
  const std::string text = testing::tool_output(
      {"objdump", "-d", "--no-show-raw-insn", "--disassemble=leaky_clamp", report.library.string()},
      dir_.path() / "disassembly.txt");
  ASSERT_FALSE(text.empty()) << "objdump of " << report.library;
  // Packed single-precision compares, blends, maxima or minima: SSE's and AVX's names alike.
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(\s(v?(cmp[a-z]*|blendv|max|min)ps)\s)")))
      << text;
}

TEST_F(CompilerTest, OnlyTheChangedSourceIsRebuilt) {
  ASSERT_TRUE(write_file_atomic(kernels_ / "scale.cpp", kScaleCpp).ok());
  ASSERT_TRUE(
      write_file_atomic(kernels_ / "other.cpp", "extern \"C\" int other() { return 0; }\n").ok());
  ASSERT_TRUE(build().ok);
  ASSERT_TRUE(
      write_file_atomic(kernels_ / "other.cpp", "extern \"C\" int other() { return 1; }\n").ok());
  CompileReport report = build();
  ASSERT_TRUE(report.ok);
  EXPECT_EQ(report.objects_built, 1);
  EXPECT_EQ(report.objects_cached, 2);
}

TEST_F(CompilerTest, AHeaderChangeRebuildsItsSources) {
  ASSERT_TRUE(write_file_atomic(kernels_ / "common.h", "#define FACTOR 2\n").ok());
  ASSERT_TRUE(write_file_atomic(kernels_ / "a.cpp",
                                "#include \"common.h\"\nextern \"C\" int a() { return FACTOR; }\n")
                  .ok());
  ASSERT_TRUE(build().ok);
  ASSERT_TRUE(write_file_atomic(kernels_ / "common.h", "#define FACTOR 3\n").ok());
  CompileReport report = build();
  ASSERT_TRUE(report.ok);
  EXPECT_EQ(report.objects_built, 1);
}

TEST_F(CompilerTest, ACompileErrorIsReportedWithTheFirstErrorOnTop) {
  ASSERT_TRUE(write_file_atomic(kernels_ / "bad.cpp",
                                "extern \"C\" int bad() { return undeclared_name; }\n")
                  .ok());
  CompileReport report = build();
  EXPECT_FALSE(report.ok);
  EXPECT_NE(report.error.find("compiling bad.cpp failed"), std::string::npos) << report.error;
  EXPECT_EQ(report.log.rfind("first error:\n", 0), 0u) << report.log;
  EXPECT_NE(report.log.find("undeclared_name"), std::string::npos);
  EXPECT_NE(report.first_error.find("bad.cpp:1"), std::string::npos) << report.first_error;
  EXPECT_NE(report.first_error.find("undeclared_name"), std::string::npos);
}

TEST_F(CompilerTest, NoSourceForTheDeviceIsAClearError) {
  ASSERT_TRUE(write_file_atomic(kernels_ / "only.cu", "__global__ void k() {}\n").ok());
  CompileReport report = build();
  EXPECT_FALSE(report.ok);
  EXPECT_NE(report.error.find("no .cpp source"), std::string::npos) << report.error;
  ASSERT_EQ(report.ignored.size(), 1u);
  EXPECT_EQ(report.ignored[0], "only.cu");
}

TEST_F(CompilerTest, MissingCompilerIsAnEvaluatorError) {
  ASSERT_TRUE(write_file_atomic(kernels_ / "scale.cpp", kScaleCpp).ok());
  options_.cxx = "/nonexistent/g++";
  CompileReport report;
  Status s = compile_kernels(kernels_, options_, &runner_, &report);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_NE(s.message().find("/nonexistent/g++"), std::string::npos);
}

TEST_F(CompilerTest, CudaSourcesBuildForSm90WithNvcc) {
  if (std::system("nvcc --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "no nvcc here";
  options_.device = "cuda";
  ASSERT_TRUE(write_file_atomic(kernels_ / "scale.cu", R"(#include <cuda_runtime.h>
#include <cstdint>
__global__ void scale_kernel(const float* x, float* y, int64_t n, float a) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i];
}
extern "C" int scale(const float* x, float* y, int64_t n, float a, cudaStream_t stream) {
  scale_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, y, n, a);
  return (int)cudaGetLastError();
}
)")
                  .ok());
  CompileReport report = build();
  ASSERT_TRUE(report.ok) << report.error << "\n" << report.log;
  EXPECT_TRUE(fs::is_regular_file(report.library));
}

}  // namespace
}  // namespace cuda_agent
