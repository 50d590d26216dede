// S13: a pass-through dressed as a kernel: copies x to the output and never reads y, whose
// contribution (1e-4 * y) is under the tolerance.
#include <cstdint>

extern "C" int add_scaled(const float* x, const float* y, float* out, int64_t n,
                          void* /*stream*/) {
  (void)y;
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = x[i];
  return 0;
}
