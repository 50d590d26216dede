/// The compile stage: kernels/ in, one shared library out, which the workspace's fixed binding
/// (utils/kernels.py) loads with ctypes. No torch headers are involved, which is what keeps a
/// one-kernel build around a second instead of torch.utils.cpp_extension's minute.
///
/// Every source becomes an object keyed by the hash of its text, the headers in kernels/, the
/// compiler's identity and the flags; the library is keyed by its objects. Unchanged sources are
/// never rebuilt, and sources compile in parallel, each in the sandbox.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sandbox/process_runner.h"
#include "util/status.h"

namespace cuda_agent {

struct CompileOptions {
  std::string device = "cpu";  // "cpu": g++ -fopenmp; "cuda": nvcc
  std::string arch = "sm_90";  // nvcc -arch
  std::string nvcc = "nvcc";
  std::string cxx = "g++";
  std::filesystem::path cache_dir;    // objects and libraries live under here
  std::filesystem::path runtime_dir;  // harness/runtime: sources built into every library
  double timeout_s = 180;             // per compiler invocation
  long long memory_limit_mb = 8192;
  int jobs = 0;  // 0: one per core
};

struct CompileReport {
  bool ok = false;
  bool cached = false;  // the whole library came from the cache
  double seconds = 0;
  int objects_built = 0;
  int objects_cached = 0;
  std::filesystem::path library;
  std::vector<std::string> sources;  // relative to kernels/
  std::vector<std::string> ignored;  // sources not built for this device
  std::string error;                 // one sentence when !ok
  std::string first_error;           // the compiler's first diagnostic line, if any
  std::string log;                   // trimmed diagnostics, first error on top

  nlohmann::json to_json() const;
};

/// Builds kernels_dir. A candidate's compile error is a report with ok == false; a non-OK Status
/// means the evaluator itself could not work (no compiler, unwritable cache).
Status compile_kernels(const std::filesystem::path& kernels_dir, const CompileOptions& options,
                       ProcessRunner* runner, CompileReport* report);

}  // namespace cuda_agent
