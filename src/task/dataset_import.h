/// Turns other people's task collections into cuda-agent suites (`cuda-agent tasks import`):
///   kernelbench  a KernelBench checkout's level folders (KernelBench/level1, ... or level1, ...
///                directly), each file kept under its own name: "level1/19_ReLU"
///   ops6k        CUDA-Agent-Ops-6K-format records, JSON Lines or Parquet as the Hugging Face
///                dataset ships them: a task's code in one field ("code" unless told), its
///                operators in "ops", "torch#N" in "data_source" giving the operator count; the
///                id is the record's own ("id", "task_id", ...) or the hash of its code, so the
///                same record always gets the same id. One operator goes to level1, more to level2.
/// Records or files that are not task files are skipped with the reason; the suite written has a
/// suite.json that names where every task came from.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "sandbox/process_runner.h"
#include "util/status.h"

namespace cuda_agent {

struct ImportOptions {
  std::filesystem::path out;       // the new suite's folder; must be missing or empty
  std::string name;                // the suite's name (default: the folder's name)
  std::string code_field;          // ops6k: the field that holds the code (default: "code")
  std::string python = "python3";  // ops6k Parquet: read through pyarrow
  std::filesystem::path harness_dir;
};

struct ImportSummary {
  int imported = 0;
  std::vector<std::string> skipped;  // one sentence per record or file left out
};

Status import_kernelbench(const std::filesystem::path& checkout, const ImportOptions& options,
                          ImportSummary* summary);

Status import_ops6k(const std::filesystem::path& records, const ImportOptions& options,
                    ProcessRunner* runner, ImportSummary* summary);

}  // namespace cuda_agent
