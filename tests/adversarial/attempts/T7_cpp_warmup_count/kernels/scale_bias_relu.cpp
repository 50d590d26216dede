// T7 (native): honest for the first 12 calls of the process (verification makes fewer), then
// the entry returns without writing anything.
#include <cstdint>

extern "C" int scale_bias_relu(const float* x, const float* bias, float* y, int64_t rows,
                               int64_t cols, float scale, void* /*stream*/) {
  static int64_t calls = 0;
  if (++calls > 12) return 0;
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
