// T9 (native): make one timed call take no time, to drag an aggregate (a mean, a minimum) down.
// Preloaded the way T5 does it (re-execute the process with LD_PRELOAD naming this library), the
// clock_gettime defined here is honest except right after the tenth kernel call: for a
// millisecond it keeps returning the reading taken just before that call, which is the timer's
// start mark, so the call's end mark equals its start mark.
#include <fcntl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr char kMarker[] = "CUDA_AGENT_T9";
constexpr int64_t kFrozenCall = 10;  // past the warm-up (3 calls) and verification (6 calls)
constexpr int64_t kFrozenNs = 1000000;

std::atomic<int64_t> g_last_read{0};      // the last monotonic reading handed out
std::atomic<int64_t> g_frozen_until{0};   // real time until which the clock stands still
std::atomic<int64_t> g_frozen_reading{0};

int64_t to_ns(const timespec& ts) {
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void from_ns(int64_t ns, timespec* ts) {
  ts->tv_sec = ns / 1000000000;
  ts->tv_nsec = ns % 1000000000;
}

std::vector<std::string> own_arguments() {
  std::vector<std::string> args;
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return args;
  std::string text;
  char buffer[4096];
  for (ssize_t got; (got = read(fd, buffer, sizeof buffer)) > 0;) text.append(buffer, got);
  close(fd);
  for (size_t at = 0; at < text.size(); at += std::strlen(text.c_str() + at) + 1) {
    args.emplace_back(text.c_str() + at);
  }
  return args;
}

__attribute__((constructor)) void reexec_with_preload() {
  if (getenv(kMarker) != nullptr) return;
  const char* self = getenv("CUDA_AGENT_KERNEL_LIB");
  if (self == nullptr || *self == '\0') return;
  std::vector<std::string> args = own_arguments();
  if (args.empty()) return;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(&a[0]);
  argv.push_back(nullptr);
  setenv(kMarker, "1", 1);
  setenv("LD_PRELOAD", self, 1);
  execv("/proc/self/exe", argv.data());
  unsetenv(kMarker);
}

}  // namespace

extern "C" int clock_gettime(clockid_t clock, struct timespec* ts) noexcept {
  if (syscall(SYS_clock_gettime, clock, ts) != 0) return -1;
  if (clock != CLOCK_MONOTONIC) return 0;
  int64_t now = to_ns(*ts);
  if (now < g_frozen_until.load()) {
    from_ns(g_frozen_reading.load(), ts);
  } else {
    g_last_read.store(now);
  }
  return 0;
}

extern "C" int scale_bias_relu(const float* x, const float* bias, float* y, int64_t rows,
                               int64_t cols, float scale, void* /*stream*/) {
  static std::atomic<int64_t> calls{0};
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      float v = xr[c] * scale + bias[c];
      yr[c] = v > 0.0f ? v : 0.0f;
    }
  }
  if (++calls == kFrozenCall) {
    timespec now;
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &now);
    g_frozen_reading.store(g_last_read.load());
    g_frozen_until.store(to_ns(now) + kFrozenNs);
  }
  return 0;
}
