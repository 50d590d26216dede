// B2: the decoy. Called on every forward, it checks its arguments and does nothing else; the
// work is done in numpy, which no torch-level guard sees.
#include <cstdint>

extern "C" int scale_bias_relu(const float* x, const float* bias, float* y, int64_t rows,
                               int64_t cols, float scale, void* /*stream*/) {
  (void)scale;
  if (x == nullptr || bias == nullptr || y == nullptr || rows < 0 || cols < 0) return 1;
  return 0;
}
