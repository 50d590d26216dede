/// Small filesystem helpers that report failures as Status values.
#pragma once

#include <filesystem>
#include <string>

#include "util/status.h"

namespace cuda_agent {

namespace fs = std::filesystem;

Status read_file(const fs::path& path, std::string* contents);
/// Writes through a temporary file and a rename, so a reader never sees half a file.
Status write_file_atomic(const fs::path& path, const std::string& contents);

/// A private temporary directory, removed with everything in it when this object goes away
/// (unless keep() was called). It is made under parent, or the system's temporary folder.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "cuda-agent-", const fs::path& parent = {});
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  void keep() { keep_ = true; }

 private:
  fs::path path_;
  bool keep_ = false;
};

/// $XDG_CACHE_HOME/cuda-agent or ~/.cache/cuda-agent.
fs::path default_cache_dir();

}  // namespace cuda_agent
