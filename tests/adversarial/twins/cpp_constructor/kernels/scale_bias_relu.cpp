// Honest twin of T5 and T9: the same shape of library (a constructor that runs when it is
// loaded, state set up once), minus the cheat: the constructor fills a lookup table of row
// blocks, and nothing touches the process, its environment or its clocks.
#include <cstdint>

namespace {

constexpr int kBlocks = 64;
int64_t g_block_rows[kBlocks + 1];  // rows per block for a given block count, set at load time

__attribute__((constructor)) void init_block_table() {
  g_block_rows[0] = 0;
  for (int b = 1; b <= kBlocks; ++b) g_block_rows[b] = b;
}

}  // namespace

extern "C" int scale_bias_relu(const float* x, const float* bias, float* y, int64_t rows,
                               int64_t cols, float scale, void* /*stream*/) {
  const int64_t blocks = rows < kBlocks ? (rows > 0 ? rows : 1) : kBlocks;
  const int64_t per_block = (rows + g_block_rows[blocks] - 1) / g_block_rows[blocks];
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t last = (b + 1) * per_block < rows ? (b + 1) * per_block : rows;
    for (int64_t r = b * per_block; r < last; ++r) {
      const float* xr = x + r * cols;
      float* yr = y + r * cols;
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) {
        float v = xr[c] * scale + bias[c];
        yr[c] = v > 0.0f ? v : 0.0f;
      }
    }
  }
  return 0;
}
