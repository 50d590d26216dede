// Kernel shapes timed beside the synthesizer's generated kernels, on random (never zero) data
// with the L2 flushed before each call, median of 21: relu over 2^29 floats and 2^30 halves
// (one flat grid of small tiles, U vectors a thread, or a grid of resident blocks looping over
// the tiles) and a sum over the middle dim of (96, 2048, 4096) (4 neighbouring columns a thread
// with 16-byte loads, QX x TY threads). run.sh generates the two kernels it compares against.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdio.h>
#include <stdint.h>
#include <algorithm>
#include <vector>
#include <functional>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1);} } while (0)
extern "C" int fused_elementwise(const float*, float*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, void*);
extern "C" int fused_elementwise_config(int64_t);
extern "C" int fused_rows(const float*, float*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, void*);
extern "C" int fused_rows_config(int64_t);

__global__ void fill(float* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 2654435761u ^ seed; h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    p[i] = (h & 0xffffff) / 4194304.0f - 2.0f;
  }
}
static void* flushbuf;
static float time_ms(std::function<void()> f) {
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) f();
  std::vector<float> t;
  for (int i = 0; i < 21; ++i) {
    CK(cudaMemsetAsync(flushbuf, i, 256 << 20));
    CK(cudaEventRecord(a)); f(); CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
    float ms; CK(cudaEventElapsedTime(&ms, a, b)); t.push_back(ms);
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end()); return t[t.size() / 2];
}
// One tile of T * U * 4 floats from base: each thread loads its U float4s, then stores them.
// C, the cache policy: 0 plain loads and __stwb stores (as generated), 1 __ldcs and __stcs
// (streaming, evict first), 2 __ldg and __stcs, 3 plain loads and plain stores.
template <int C> __device__ float4 load4(const float* p) {
  if (C == 1) return __ldcs(reinterpret_cast<const float4*>(p));
  if (C == 2) return __ldg(reinterpret_cast<const float4*>(p));
  return *reinterpret_cast<const float4*>(p);
}
template <int C> __device__ void store4(float* p, float4 v) {
  if (C == 0) __stwb(reinterpret_cast<float4*>(p), v);
  else if (C == 3) *reinterpret_cast<float4*>(p) = v;
  else __stcs(reinterpret_cast<float4*>(p), v);
}
template <int T, int U, int C = 0>
__device__ void relu_tile(const float* __restrict__ x, float* __restrict__ y, int64_t n, int64_t tile) {
  const int64_t base = tile * (T * U * 4) + threadIdx.x * 4;
  float4 v[U];
#pragma unroll
  for (int u = 0; u < U; ++u) { int64_t i = base + u * T * 4; if (i < n) v[u] = load4<C>(x + i); }
#pragma unroll
  for (int u = 0; u < U; ++u) { int64_t i = base + u * T * 4; if (i < n) {
    float4 r = make_float4(fmaxf(v[u].x, 0.f), fmaxf(v[u].y, 0.f), fmaxf(v[u].z, 0.f), fmaxf(v[u].w, 0.f));
    store4<C>(y + i, r); } }
}
template <int T, int U, int C = 0>
__global__ void __launch_bounds__(T) relu_flat(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  relu_tile<T, U, C>(x, y, n, blockIdx.x);
}
template <int T, int U>
__global__ void __launch_bounds__(T) relu_persist(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  for (int64_t c = blockIdx.x; c * (T * U * 4) < n; c += gridDim.x) relu_tile<T, U>(x, y, n, c);
}
template <int T, int U>
__global__ void __launch_bounds__(T) relu_flat_h(const __half* __restrict__ x, __half* __restrict__ y, int64_t n) {
  const int64_t base = (int64_t)blockIdx.x * (T * U * 8) + threadIdx.x * 8;
  uint4 v[U];
#pragma unroll
  for (int u = 0; u < U; ++u) { int64_t i = base + u * T * 8; if (i < n) v[u] = *reinterpret_cast<const uint4*>(x + i); }
#pragma unroll
  for (int u = 0; u < U; ++u) { int64_t i = base + u * T * 8; if (i < n) {
    uint32_t w[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
    for (int q = 0; q < 4; ++q) { float2 f = __half22float2(*reinterpret_cast<__half2*>(&w[q]));
      __half2 h = __floats2half2_rn(fmaxf(f.x, 0.f), fmaxf(f.y, 0.f)); w[q] = *reinterpret_cast<uint32_t*>(&h); }
    __stwb(reinterpret_cast<uint4*>(y + i), make_uint4(w[0], w[1], w[2], w[3])); } }
}
// sum over the middle dim of (B, R, C): QX threads across (4 columns each), TY along R.
template <int QX, int TY, int UNR>
__global__ void __launch_bounds__(QX * TY) sum_mid(const float* __restrict__ x, float* __restrict__ y, int R, int C) {
  __shared__ float4 red[QX * TY];
  const int qx = threadIdx.x % QX, ty = threadIdx.x / QX;
  const int64_t col = ((int64_t)blockIdx.x * QX + qx) * 4;
  const float* p = x + (int64_t)blockIdx.y * R * C + col;
  float4 a = make_float4(0, 0, 0, 0);
  if (col < C) {
#pragma unroll UNR
    for (int k = ty; k < R; k += TY) { float4 v = *reinterpret_cast<const float4*>(p + (int64_t)k * C); a.x += v.x; a.y += v.y; a.z += v.z; a.w += v.w; }
  }
  red[ty * QX + qx] = a; __syncthreads();
  for (int s = TY / 2; s > 0; s >>= 1) { if (ty < s) { float4 b = red[(ty + s) * QX + qx]; a.x += b.x; a.y += b.y; a.z += b.z; a.w += b.w; red[ty * QX + qx] = a; } __syncthreads(); }
  if (ty == 0 && col < C) *reinterpret_cast<float4*>(y + (int64_t)blockIdx.y * C + col) = a;
}
int main() {
  CK(cudaMalloc(&flushbuf, 256 << 20));
  { // relu fp32
    const int64_t rows = 16384, cols = 32768, n = rows * cols;
    float *x, *y; CK(cudaMalloc(&x, n * 4)); CK(cudaMalloc(&y, n * 4));
    fill<<<4096, 256>>>(x, n, 1); CK(cudaDeviceSynchronize());
    printf("relu fp32 %lld elements (4 GiB moved)\n", (long long)n);
    printf("  memcpy D2D 2GiB: %.3f ms\n", time_ms([&] { CK(cudaMemcpyAsync(y, x, n * 4, cudaMemcpyDeviceToDevice)); }));
    for (int c : {-1, 0, 1, 2, 3, 4, 5}) { fused_elementwise_config(c);
      printf("  generated cfg %d: %.3f ms\n", c, time_ms([&] { CK((cudaError_t)fused_elementwise(x, y, 32768, 16384, 16384, 1, 32768, 1, 16384, 0)); })); }
#define FLAT(T, U) printf("  flat T=%d U=%d: %.3f ms\n", T, U, time_ms([&] { relu_flat<T, U><<<(unsigned)((n + T * U * 4 - 1) / (T * U * 4)), T>>>(x, y, n); }));
    FLAT(128, 1) FLAT(128, 2) FLAT(128, 4) FLAT(128, 8) FLAT(256, 1) FLAT(256, 2) FLAT(256, 4) FLAT(256, 8) FLAT(512, 1) FLAT(512, 2) FLAT(512, 4)
#define FLATC(T, U, C) printf("  flat T=%d U=%d cache %d: %.3f ms\n", T, U, C, time_ms([&] { relu_flat<T, U, C><<<(unsigned)((n + T * U * 4 - 1) / (T * U * 4)), T>>>(x, y, n); }));
    FLATC(128, 1, 1) FLATC(128, 2, 1) FLATC(256, 1, 1) FLATC(256, 2, 1) FLATC(256, 4, 1) FLATC(128, 1, 2) FLATC(256, 2, 2) FLATC(128, 1, 3) FLATC(256, 1, 3) FLATC(256, 2, 3)
    int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
#define PERS(T, U, M) { int per; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, relu_persist<T, U>, T, 0)); \
    printf("  persistent T=%d U=%d x%d: %.3f ms\n", T, U, M, time_ms([&] { relu_persist<T, U><<<sms * per * M, T>>>(x, y, n); })); }
    PERS(256, 4, 1) PERS(512, 4, 1) PERS(256, 2, 1) PERS(256, 4, 4)
    CK(cudaFree(x)); CK(cudaFree(y));
  }
  { // relu fp16
    const int64_t n = 1LL << 30;
    __half *x, *y; CK(cudaMalloc(&x, n * 2)); CK(cudaMalloc(&y, n * 2));
    fill<<<4096, 256>>>((float*)x, n / 2, 7); CK(cudaDeviceSynchronize());
    printf("relu fp16 %lld elements (4 GiB moved)\n", (long long)n);
#define FLATH(T, U) printf("  flat fp16 T=%d U=%d: %.3f ms\n", T, U, time_ms([&] { relu_flat_h<T, U><<<(unsigned)((n + T * U * 8 - 1) / (T * U * 8)), T>>>(x, y, n); }));
    FLATH(128, 2) FLATH(128, 4) FLATH(256, 1) FLATH(256, 2) FLATH(256, 4) FLATH(512, 2)
    CK(cudaFree(x)); CK(cudaFree(y));
  }
  { // sum over the middle dim
    const int B = 96, R = 2048, C = 4096; const int64_t n = (int64_t)B * R * C;
    float *x, *y, *y0; CK(cudaMalloc(&x, n * 4)); CK(cudaMalloc(&y, B * C * 4)); CK(cudaMalloc(&y0, B * C * 4));
    fill<<<4096, 256>>>(x, n, 3); CK(cudaDeviceSynchronize());
    printf("sum (96, 2048, 4096) over dim 1 (3 GiB read)\n");
    for (int c : {100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 300, 301, 302, 303, 304, 305}) { fused_rows_config(c);
      printf("  generated cfg %d: %.3f ms\n", c, time_ms([&] { CK((cudaError_t)fused_rows(x, y0, B, R, C, 1, B, (int64_t)R * C, 1, C, 1, C, 0)); })); }
    std::vector<float> h0(B * C), h(B * C);
    CK(cudaMemcpy(h0.data(), y0, B * C * 4, cudaMemcpyDeviceToHost));
#define SUM(QX, TY, UNR) { float ms = time_ms([&] { sum_mid<QX, TY, UNR><<<dim3(C / (QX * 4), B), QX * TY>>>(x, y, R, C); }); \
    CK(cudaMemcpy(h.data(), y, B * C * 4, cudaMemcpyDeviceToHost)); float d = 0; for (int i = 0; i < B * C; ++i) d = std::max(d, fabsf(h[i] - h0[i])); \
    printf("  vec4 QX=%d TY=%d unroll %d: %.3f ms (max diff %.2e)\n", QX, TY, UNR, ms, d); }
    SUM(64, 8, 4) SUM(64, 8, 8) SUM(32, 8, 8) SUM(32, 16, 8) SUM(64, 4, 8) SUM(128, 4, 8) SUM(16, 16, 8) SUM(16, 32, 8) SUM(32, 4, 8) SUM(64, 16, 4) SUM(128, 2, 8) SUM(256, 2, 8)
  }
  printf("done\n");
  return 0;
}
