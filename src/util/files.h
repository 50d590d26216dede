/// Small filesystem helpers that report failures as Status values.
#pragma once

#include <filesystem>
#include <functional>
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

/// An exclusive lock on a file (flock), held until this object goes away or the process ends, so a
/// process killed while holding it never leaves it held. Shared by processes and by threads of one
/// process alike (each Acquire opens the file anew).
class FileLock {
 public:
  FileLock() = default;
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  /// Waits until the lock on path is free and takes it (the file and its folder are created).
  /// Every half second of waiting, waiting() is called if set; when it returns false the wait is
  /// given up (an Internal status).
  static Status Acquire(const fs::path& path, FileLock* lock,
                        const std::function<bool(double waited_s)>& waiting = {});
  bool held() const { return fd_ >= 0; }
  void release();

 private:
  int fd_ = -1;
};

/// $XDG_CACHE_HOME/cuda-agent or ~/.cache/cuda-agent.
fs::path default_cache_dir();

}  // namespace cuda_agent
