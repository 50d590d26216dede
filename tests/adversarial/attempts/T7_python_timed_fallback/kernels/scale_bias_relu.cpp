// relu(x * scale + bias) in one pass: rows split across OpenMP threads, columns vectorised.
#include <cstdint>

extern "C" int scale_bias_relu(const float* x, const float* bias, float* y, int64_t rows,
                               int64_t cols, float scale, void* /*stream*/) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) {
      float v = xr[c] * scale + bias[c];
      yr[c] = v > 0.0f ? v : 0.0f;
    }
  }
  return 0;
}
