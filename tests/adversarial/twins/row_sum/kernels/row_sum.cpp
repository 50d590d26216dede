// Sum over the last dimension: one row per iteration, rows split across OpenMP threads.
#include <cstdint>

extern "C" int row_sum(const float* x, float* y, int64_t rows, int64_t cols, void* /*stream*/) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < cols; ++c) sum += xr[c];
    y[r] = sum;
  }
  return 0;
}
