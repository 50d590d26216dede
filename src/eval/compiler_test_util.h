/// Helpers for tests that build kernels as the evaluator builds them and look at the result.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "eval/compiler.h"
#include "sandbox/process_runner.h"
#include "util/files.h"
#include "util/paths.h"

namespace cuda_agent::testing {

/// `source` written to dir/kernels/`file` and built for the CPU device as the evaluator builds
/// kernels/ (its flags, its runtime, a cache in dir): the report, whether or not it built. *status
/// is the evaluator's own error, if any.
inline CompileReport build_cpu_kernel(const std::filesystem::path& dir, const std::string& file,
                                      const std::string& source, Status* status) {
  const std::filesystem::path kernels = dir / "kernels";
  std::filesystem::create_directories(kernels);
  CompileReport report;
  *status = write_file_atomic(kernels / file, source);
  if (!status->ok()) return report;
  CompileOptions options;
  options.device = "cpu";
  options.cache_dir = dir / "cache";
  options.runtime_dir = harness_dir() / "runtime";
  PosixProcessRunner runner;
  *status = compile_kernels(kernels, options, &runner, &report);
  return report;
}

/// What a tool (objdump, nm) printed to stdout, kept in `scratch`; empty if it did not succeed.
inline std::string tool_output(const std::vector<std::string>& argv,
                               const std::filesystem::path& scratch) {
  ProcessSpec spec;
  spec.argv = argv;
  spec.stdout_path = scratch;
  PosixProcessRunner runner;
  std::string text;
  if (!runner.run(spec).succeeded() || !read_file(scratch, &text).ok()) return "";
  return text;
}

}  // namespace cuda_agent::testing
