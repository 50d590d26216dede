#include "util/files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

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

FileLock::~FileLock() { release(); }

void FileLock::release() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor drops the flock
  fd_ = -1;
}

Status FileLock::Acquire(const fs::path& path, FileLock* lock,
                         const std::function<bool(double waited_s)>& waiting) {
  lock->release();
  std::error_code ec;
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return Status::IoError("cannot open the lock " + path.string() + ": " + std::strerror(errno));
  const auto start = std::chrono::steady_clock::now();
  auto next_call = start + std::chrono::milliseconds(500);
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      return Status::IoError("cannot lock " + path.string() + ": " + why);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const auto now = std::chrono::steady_clock::now();
    if (waiting && now >= next_call) {
      next_call = now + std::chrono::milliseconds(500);
      if (!waiting(std::chrono::duration<double>(now - start).count())) {
        ::close(fd);
        return Status::Internal("gave up waiting for the lock " + path.string());
      }
    }
  }
  lock->fd_ = fd;
  return Status::OK();
}

fs::path default_cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return fs::path(xdg) / "cuda-agent";
  if (const char* home = std::getenv("HOME"); home && *home)
    return fs::path(home) / ".cache" / "cuda-agent";
  return fs::temp_directory_path() / "cuda-agent-cache";
}

}  // namespace cuda_agent
