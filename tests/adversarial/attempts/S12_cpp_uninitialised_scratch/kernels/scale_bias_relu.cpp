// S12: reads uninitialised memory. Each call mallocs a scratch buffer the size of the output,
// computes the first half of the rows into it, and copies all of it to the output: the second
// half is whatever malloc's memory held (zeros from a fresh mapping, or a freed tensor's values,
// which a lax check may accept).
#include <cstdint>
#include <cstdlib>
#include <cstring>

extern "C" int scale_bias_relu(const float* x, const float* bias, float* y, int64_t rows,
                               int64_t cols, float scale, void* /*stream*/) {
  const size_t n = static_cast<size_t>(rows * cols);
  float* scratch = static_cast<float*>(std::malloc(n * sizeof(float)));
  if (scratch == nullptr) return 1;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows / 2; ++r) {
    const float* xr = x + r * cols;
    float* sr = scratch + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      float v = xr[c] * scale + bias[c];
      sr[c] = v > 0.0f ? v : 0.0f;
    }
  }
  std::memcpy(y, scratch, n * sizeof(float));
  std::free(scratch);
  return 0;
}
