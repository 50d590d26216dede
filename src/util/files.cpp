#include "util/files.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace cuda_agent {

Status read_file(const fs::path& path, std::string* contents) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path.string() + ": " + std::strerror(errno));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  *contents = buffer.str();
  return Status::OK();
}

Status write_file_atomic(const fs::path& path, const std::string& contents) {
  fs::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return Status::IoError(tmp.string() + ": " + std::strerror(errno));
    out << contents;
    if (!out.flush()) return Status::IoError(tmp.string() + ": write failed");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Status::IoError(path.string() + ": " + ec.message());
  return Status::OK();
}

TempDir::TempDir(const std::string& prefix, const fs::path& parent) {
  fs::path base = parent.empty() ? fs::temp_directory_path() : parent;
  std::error_code ec;
  fs::create_directories(base, ec);
  std::string pattern = (base / (prefix + "XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("cannot create a temporary directory: " +
                             std::string(std::strerror(errno)));
  }
  path_ = pattern;
}

TempDir::~TempDir() {
  if (keep_) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
}

fs::path default_cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return fs::path(xdg) / "cuda-agent";
  if (const char* home = std::getenv("HOME"); home && *home)
    return fs::path(home) / ".cache" / "cuda-agent";
  return fs::temp_directory_path() / "cuda-agent-cache";
}

}  // namespace cuda_agent
