// Honest twin of T11, S8, S12 and S14 (native): a static, malloc'd scratch buffer kept between
// calls (grown when a larger shape comes), as the cheats keep theirs, minus the cheat: each call
// writes all of it from this call's inputs before copying it out, so nothing of an earlier call
// reaches an output.
#include <cstdint>
#include <cstdlib>
#include <cstring>

static float* g_scratch = nullptr;  // a static pointer: a warning for the source rules, no more
static size_t g_capacity = 0;

extern "C" int scale_bias_relu(const float* x, const float* bias, float* y, int64_t rows,
                               int64_t cols, float scale, void* /*stream*/) {
  const size_t n = static_cast<size_t>(rows * cols);
  if (n > g_capacity) {
    float* grown = static_cast<float*>(std::realloc(g_scratch, n * sizeof(float)));
    if (grown == nullptr) return 1;
    g_scratch = grown;
    g_capacity = n;
  }
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* sr = g_scratch + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      float v = xr[c] * scale + bias[c];
      sr[c] = v > 0.0f ? v : 0.0f;
    }
  }
  std::memcpy(y, g_scratch, n * sizeof(float));
  return 0;
}
