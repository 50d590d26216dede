// softmax over each row, times scale: max, sum of exponentials, normalise; one row per
// iteration, rows split across OpenMP threads.
#include <cmath>
#include <cstdint>

extern "C" int softmax_scale(const float* x, float* y, int64_t rows, int64_t cols, float scale,
                             void* /*stream*/) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float top = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) top = xr[c] > top ? xr[c] : top;
    float sum = 0.0f;
    for (int64_t c = 0; c < cols; ++c) {
      yr[c] = std::exp(xr[c] - top);
      sum += yr[c];
    }
    const float factor = scale / sum;
    for (int64_t c = 0; c < cols; ++c) yr[c] *= factor;
  }
  return 0;
}
