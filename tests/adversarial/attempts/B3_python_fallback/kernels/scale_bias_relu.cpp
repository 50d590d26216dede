// A kernel that only handles rows of 4096 features (and says so with error code 2), so that the
// B3 candidate's fallback path is the one taken on the task's 2048.
#include <cstdint>

extern "C" int scale_bias_relu(const float* x, const float* bias, float* y, int64_t rows,
                               int64_t cols, float scale, void* /*stream*/) {
  if (cols % 4096 != 0) return 2;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      float v = xr[c] * scale + bias[c];
      yr[c] = v > 0.0f ? v : 0.0f;
    }
  }
  return 0;
}
