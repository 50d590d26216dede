// S14 (native): state across calls, out of the module's sight. A static buffer holds the
// previous call's input; each output gets half of it added. Right on the first call of the
// process, wrong on every later one.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace {

std::vector<float> g_running;

}  // namespace

extern "C" int scale_bias_relu(const float* x, const float* bias, float* y, int64_t rows,
                               int64_t cols, float scale, void* /*stream*/) {
  const size_t n = static_cast<size_t>(rows * cols);
  if (g_running.size() != n) g_running.assign(n, 0.0f);
  float* running = g_running.data();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* rr = running + r * cols;
    float* yr = y + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      float v = xr[c] * scale + bias[c];
      yr[c] = (v > 0.0f ? v : 0.0f) + 0.5f * rr[c];
      rr[c] = xr[c];
    }
  }
  return 0;
}
