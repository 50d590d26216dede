/// Where cuda-agent finds its own files: the trusted harness scripts and the workspace templates.
#pragma once

#include <filesystem>

namespace cuda_agent {

/// $CUDA_AGENT_HOME if set, else the source tree the binary was built from.
std::filesystem::path install_root();
/// install_root()/harness: the trusted Python scripts.
std::filesystem::path harness_dir();
/// The absolute path of the running cuda-agent binary.
std::filesystem::path self_executable();

}  // namespace cuda_agent
