#include "util/paths.h"

#include <cstdlib>

namespace cuda_agent {

std::filesystem::path install_root() {
  if (const char* home = std::getenv("CUDA_AGENT_HOME"); home && *home) return home;
  return CUDA_AGENT_SOURCE_DIR;
}

std::filesystem::path harness_dir() { return install_root() / "harness"; }

std::filesystem::path self_executable() {
  std::error_code ec;
  auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path("cuda-agent") : path;
}

}  // namespace cuda_agent
