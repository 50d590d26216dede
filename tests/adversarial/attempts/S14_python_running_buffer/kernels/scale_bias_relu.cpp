// relu(x * scale + bias), then the S14 candidate's running state: y += decay * running, and
// running = x (both in one pass).
#include <cstdint>

extern "C" int scale_bias_relu_running(const float* x, const float* bias, float* running,
                                       float* y, int64_t rows, int64_t cols, float scale,
                                       float decay, void* /*stream*/) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* rr = running + r * cols;
    float* yr = y + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      float v = xr[c] * scale + bias[c];
      yr[c] = (v > 0.0f ? v : 0.0f) + decay * rr[c];
      rr[c] = xr[c];
    }
  }
  return 0;
}
