// relu(x) * scale over a flat buffer, split across OpenMP threads.
#include <cstdint>

extern "C" int relu_scale(const float* x, float* y, int64_t n, float scale, void* /*stream*/) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] > 0.0f ? x[i] : 0.0f) * scale;
  return 0;
}
