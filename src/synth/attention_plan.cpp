#include "synth/attention_plan.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "synth/expression.h"
#include "synth/model_source.h"
#include "util/hash.h"
#include "util/text.h"

namespace cuda_agent::synth {
namespace {

using nlohmann::json;

constexpr std::int64_t kLargestHeadDim = 128;  // the CUDA kernel's registers hold 16 x that

std::string n(std::int64_t k) { return std::to_string(k); }

bool is_gemm(const Op& op) { return op.name == "matmul" || op.name == "bmm"; }

/// The one op that reads value, or -1 where none, several, or the graph's outputs do.
int only_reader(const Graph& graph, int value) {
  if (std::count(graph.outputs.begin(), graph.outputs.end(), value)) return -1;
  int reader = -1;
  for (std::size_t k = 0; k < graph.ops.size(); ++k) {
    const auto& in = graph.ops[k].inputs;
    if (std::find(in.begin(), in.end(), value) == in.end()) continue;
    if (reader >= 0) return -1;
    reader = static_cast<int>(k);
  }
  return reader;
}

const TensorType* type_of(const Graph& graph, int value) {
  const auto& r = graph.values[value].results;
  return r.size() == 1 ? &r[0] : nullptr;
}

/// The value an argument names, or -1.
int argument_value(const Graph& graph, const Op& op, std::size_t index) {
  if (!op.args.is_array() || index >= op.args.size()) return -1;
  const json& a = op.args[index];
  return a.is_object() && a.contains("ref") ? graph.find(a["ref"].get<std::string>()) : -1;
}

/// Whether op is softmax over its last dim, computed in its input's dtype.
bool softmax_of_last_dim(const Graph& graph, const Op& op, std::string* why) {
  if (op.name != "softmax" && op.name != "_softmax") {
    *why = op.target + " is no softmax";
    return false;
  }
  const TensorType* t = op.inputs.empty() ? nullptr : type_of(graph, op.inputs[0]);
  const json& dim = argument(op, 1, "dim");
  const auto rank = t ? static_cast<std::int64_t>(t->shape.size()) : 0;
  if (!t || rank == 0 || !dim.is_number_integer() ||
      (dim.get<std::int64_t>() % rank + rank) % rank != rank - 1) {
    *why = op.target + " is not over the last dim";
    return false;
  }
  const json& cast =
      op.name == "softmax" ? argument(op, 2, "dtype") : argument(op, 2, "half_to_float");
  if (!(cast.is_null() || (cast.is_boolean() && !cast.get<bool>()))) {
    *why = op.target + " changes the dtype";
    return false;
  }
  return true;
}

/// The input of op that carries the scores along f: the one made by a GEMM or an elementwise
/// op, of the scores' shape; -1 where there is not exactly one.
int running_input(const Graph& graph, const Op& op, const std::vector<std::int64_t>& shape) {
  int found = -1;
  for (int input : std::set<int>(op.inputs.begin(), op.inputs.end())) {
    const int maker = graph.values[input].op;
    const TensorType* t = type_of(graph, input);
    if (maker < 0 || !t || t->shape != shape) continue;
    const Op& m = graph.ops[maker];
    if (!is_gemm(m) && !is_elementwise_op(m.name)) continue;
    if (found >= 0) return -1;
    found = input;
  }
  return found;
}

}  // namespace

std::vector<int> AttentionOps::all() const {
  std::vector<int> ops = chain;
  ops.insert(ops.begin(), scores);
  ops.push_back(softmax);
  ops.push_back(output);
  return ops;
}

bool match_attention(const Graph& graph, int softmax, AttentionOps* ops, std::string* why) {
  *ops = {};
  const Op& op = graph.ops[softmax];
  if (!softmax_of_last_dim(graph, op, why)) return false;
  const int probabilities = op.value;
  const int reader = only_reader(graph, probabilities);
  if (reader < 0 || !is_gemm(graph.ops[reader]) ||
      argument_value(graph, graph.ops[reader], 0) != probabilities ||
      argument_value(graph, graph.ops[reader], 1) == probabilities) {
    *why =
        "the softmax's probabilities are not the first operand of one GEMM and read by "
        "nothing else";
    return false;
  }
  const TensorType* shape = type_of(graph, op.inputs[0]);
  // Back from the softmax along f to the GEMM of the scores, each value read only by the next.
  int value = op.inputs[0], next = softmax;
  std::vector<int> chain;
  while (true) {
    const int maker = graph.values[value].op;
    if (maker < 0) {
      *why = "the softmax does not read a GEMM's scores";
      return false;
    }
    if (only_reader(graph, value) != next) {
      *why = graph.values[value].name + " is read by more than the attention";
      return false;
    }
    const Op& m = graph.ops[maker];
    if (is_gemm(m)) {
      ops->scores = maker;
      break;
    }
    const int running = is_elementwise_op(m.name) ? running_input(graph, m, shape->shape) : -1;
    if (running < 0) {
      *why = m.target + " between the scores and the softmax is no elementwise op of the scores";
      return false;
    }
    chain.insert(chain.begin(), maker);
    next = maker;
    value = running;
  }
  ops->chain = std::move(chain);
  ops->softmax = softmax;
  ops->output = reader;
  return true;
}

Status plan_attention(const Graph& graph, AttentionPlan* plan) {
  *plan = {};
  const auto refuse = [](const std::string& why) {
    return Status::InvalidArgument("no attention plan: " + why);
  };
  int softmax = -1;
  for (std::size_t k = 0; k < graph.ops.size(); ++k) {
    if (graph.ops[k].name == "softmax" || graph.ops[k].name == "_softmax") {
      if (softmax >= 0) return refuse("more than one softmax");
      softmax = static_cast<int>(k);
    }
  }
  if (softmax < 0) return refuse("no softmax");
  AttentionOps ops;
  std::string why;
  if (!match_attention(graph, softmax, &ops, &why)) return refuse(why);
  if (ops.all().size() != graph.ops.size()) return refuse("ops besides the attention's");
  const Op& scores = graph.ops[ops.scores];
  const Op& output = graph.ops[ops.output];
  if (graph.outputs != std::vector<int>{output.value}) {
    return refuse("outputs besides the attention's");
  }
  plan->q = argument_value(graph, scores, 0);
  plan->kt = argument_value(graph, scores, 1);
  plan->v = argument_value(graph, output, 1);
  if (plan->q < 0 || plan->kt < 0 || plan->v < 0 || scores.args.size() != 2 ||
      output.args.size() != 2) {
    return refuse("a GEMM of operands other than two tensors");
  }
  const TensorType* q = type_of(graph, plan->q);
  const TensorType* kt = type_of(graph, plan->kt);
  const TensorType* v = type_of(graph, plan->v);
  const TensorType* s = type_of(graph, scores.value);
  const TensorType* o = type_of(graph, output.value);
  if (!q || !kt || !v || !s || !o || q->shape.size() < 2 || kt->shape.size() < 2 ||
      v->shape.size() < 2 || s->shape.size() < 2) {
    return refuse("a GEMM of vectors");
  }
  plan->dtype = q->dtype;
  if (!is_16_bit_float(plan->dtype)) {
    return refuse("Q is " + plan->dtype + ": the tensor cores' kernel takes float16 and bfloat16");
  }
  for (const TensorType* t : {kt, v, s, o, type_of(graph, graph.ops[softmax].value)}) {
    if (!t || t->dtype != plan->dtype) return refuse("operands and results of several dtypes");
  }
  plan->head_dim = q->shape.back();
  plan->value_dim = v->shape.back();
  const std::int64_t lq = q->shape[q->shape.size() - 2], lk = kt->shape.back();
  if (kt->shape[kt->shape.size() - 2] != plan->head_dim || v->shape[v->shape.size() - 2] != lk) {
    return refuse("GEMMs whose inner dims differ");
  }
  for (std::int64_t dim : {plan->head_dim, plan->value_dim}) {
    if (dim % 16 != 0 || dim < 16 || dim > kLargestHeadDim) {
      return refuse("a head dim of " + n(dim) + ", not a multiple of 16 up to " +
                    n(kLargestHeadDim));
    }
  }
  plan->batch_rank = static_cast<int>(s->shape.size()) - 2;
  if (plan->batch_rank > 2) return refuse("more than two batch dims");
  std::vector<std::int64_t> expected(s->shape.begin(), s->shape.end() - 2);
  expected.push_back(lq);
  expected.push_back(plan->value_dim);
  if (s->shape[s->shape.size() - 2] != lq || s->shape.back() != lk || o->shape != expected) {
    return refuse("V broadcasts the scores' batch dims");
  }
  // f, written as the other plans write elementwise ops.
  std::vector<std::string> problems;
  ElementLines f(graph, {&plan->inputs, &plan->lines, &plan->ops, "b", false, "attention"},
                 &problems);
  f.define(scores.value, "s", true);  // rounded first (score_lines)
  plan->ops.insert(plan->ops.begin(), scores.name);
  for (int k : ops.chain) {
    const Op& op = graph.ops[k];
    const TensorType* t = type_of(graph, op.value);
    if (!t || t->dtype != plan->dtype || t->shape != s->shape || !f.add(op, s->shape)) {
      if (problems.empty()) problems.push_back(op.target + " changes the scores' shape or dtype");
      return refuse(join(problems, "; "));
    }
  }
  const int last = graph.ops[softmax].inputs[0];
  if (!f.operand(last, s->shape, &plan->score)) return refuse(join(problems, "; "));
  if (!ops.chain.empty()) {
    const Op& fill = graph.ops[ops.chain.back()];
    const json& value = argument(fill, 2, "value");
    const int mask = argument_value(graph, fill, 1);
    const bool minus_inf =
        (value.is_string() && value.get<std::string>() == "-inf") ||
        (value.is_number() && std::isinf(value.get<double>()) && value.get<double>() < 0);
    if (fill.name == "masked_fill" && minus_inf && mask >= 0) {
      for (std::size_t k = 0; k < plan->inputs.size(); ++k) {
        if (plan->inputs[k].value == mask && plan->inputs[k].dtype == "bool") {
          plan->mask = static_cast<int>(k);
        }
      }
    }
  }
  plan->ops.push_back(graph.ops[softmax].name);
  plan->ops.push_back(output.name);
  return Status::OK();
}

namespace {

/// The kernel entry's parameters, the same on both backends: Q, K^T, V, f's tensors and the
/// output; then B, H, Lq, Lk and each tensor's four strides (in elements) against the
/// (B, H, ...) shapes model_new.py views them at.
std::string entry_params(const AttentionPlan& plan) {
  std::string p = "const T* q, const T* kt, const T* v, ";
  for (std::size_t k = 0; k < plan.inputs.size(); ++k) {
    p += "const " + element_type(plan.inputs[k].dtype) + "* p_in" + n(k) + ", ";
  }
  p += "T* out, int64_t B, int64_t H, int64_t Lq, int64_t Lk";
  for (const char* t : {"q", "k", "v"}) {
    for (int d = 0; d < 4; ++d) p += ", int64_t " + std::string(t) + n(d);
  }
  for (std::size_t k = 0; k < plan.inputs.size(); ++k) {
    for (int d = 0; d < 4; ++d) p += ", int64_t e" + n(k) + "_" + n(d);
  }
  return p + ", void* stream";
}

/// Reads f's tensors at score (b, h, i, j) from pointer expressions `prefix`p_in<k>, strides
/// `prefix`e<k>_<d>, then f's lines.
std::string score_lines(const AttentionPlan& plan, const std::string& prefix,
                        const std::string& indent) {
  // The product rounded to the dtype as torch stores it, so that f and the softmax see torch's
  // values: on an input with a large element, the rounding moves a score by more than the
  // tolerance allows its exponential to move.
  std::string s = indent + "s = " + rounded("s", plan.dtype) + ";\n";
  for (std::size_t k = 0; k < plan.inputs.size(); ++k) {
    const std::string e = prefix + "e" + n(k) + "_";
    s += indent + "const float in" + n(k) + " = sa_load(" + prefix + "p_in" + n(k) + "[b * " + e +
         "0 + h * " + e + "1 + i * " + e + "2 + j * " + e + "3]);\n";
  }
  for (const std::string& line : plan.lines) s += indent + line + "\n";
  return s;
}

std::string cpu_source(const AttentionPlan& plan, const std::string& head) {
  return head + "#include <stdlib.h>\n#include <string.h>\n#include <omp.h>\n\n" +
         "#define SA_FN static inline\n" + dtype_helpers("cpu") + kExpressionHelpers + "typedef " +
         element_type(plan.dtype) + " T;\n#define SA_D " + n(plan.head_dim) + "\n#define SA_DV " +
         n(plan.value_dim) +
         "\n\n"
         "extern \"C\" int fused_attention_config(int64_t config) {  // one schedule\n"
         "  (void)config;\n"
         "  return 0;\n"
         "}\n\n"
         "extern \"C\" int fused_attention(" +
         entry_params(plan) +
         ") {\n"
         "  (void)stream;\n"
         "  const int64_t rows = B * H * Lq;\n"
         "  if (Lk == 0) {  // no keys: softmax(empty) @ V(empty) is zeros\n"
         "    memset(out, 0, sizeof(T) * rows * SA_DV);\n"
         "    return 0;\n"
         "  }\n"
         "  int failed = 0;\n"
         "#pragma omp parallel\n"
         "  {\n"
         "    float* p = (float*)malloc(sizeof(float) * Lk);  // a row's scores\n"
         "    if (!p) {\n"
         "#pragma omp atomic write\n"
         "      failed = 1;\n"
         "    }\n"
         "#pragma omp for schedule(static)\n"
         "    for (int64_t r = 0; r < rows; ++r) {\n"
         "      if (!p) continue;\n"
         "      const int64_t b = r / (H * Lq), h = (r / Lq) % H, i = r % Lq;\n"
         "      float qf[SA_D];\n"
         "      for (int d = 0; d < SA_D; ++d) qf[d] = sa_load(q[b * q0 + h * q1 + i * q2 + d * "
         "q3]);\n"
         "      float m = -INFINITY;\n"
         "      for (int64_t j = 0; j < Lk; ++j) {\n"
         "        const T* kj = kt + b * k0 + h * k1 + j * k3;\n"
         "        float s = 0.0f;\n"
         "        for (int d = 0; d < SA_D; ++d) s += qf[d] * sa_load(kj[d * k2]);\n" +
         score_lines(plan, "", "        ") + "        p[j] = " + plan.score +
         ";\n"
         "        if (p[j] > m) m = p[j];\n"
         "      }\n"
         "      // A row masked whole is NaN, as torch's softmax makes it: 0 / 0.\n"
         "      const float base = m == -INFINITY ? 0.0f : m;\n"
         "      float l = 0.0f, acc[SA_DV];\n"
         "      for (int c = 0; c < SA_DV; ++c) acc[c] = 0.0f;\n"
         "      for (int64_t j = 0; j < Lk; ++j) {\n"
         "        const float e = expf(p[j] - base);\n"
         "        const T* vj = v + b * v0 + h * v1 + j * v2;\n"
         "        l += e;\n"
         "        for (int c = 0; c < SA_DV; ++c) acc[c] += e * sa_load(vj[c * v3]);\n"
         "      }\n"
         "      for (int c = 0; c < SA_DV; ++c) sa_store(out + r * SA_DV + c, acc[c] / l);\n"
         "    }\n"
         "    free(p);\n"
         "  }\n"
         "  return failed;\n"
         "}\n";
}

// The CUDA kernel, after the plan's definitions (T, SA_D, SA_DV, SA_MMA_TYPES, SaArgs and
// sa_score): a block of 4 warps takes 64 or 128 queries of one (batch, head) and walks the keys
// 64 at a time. The keys and values of the next step are on their way into shared memory (cp.async,
// two stages) while the warps compute on this one's; each row there is padded by 8 elements, so
// that the 8 rows an ldmatrix phase reads fall in distinct banks.
const char* const kCudaKernel =
    R"(// MT m-tiles of 16 queries a warp: a block of 4 warps takes 64 MT queries. With two, each
// key and value fragment a warp reads from shared memory feeds twice the products; they need
// registers for twice the scores and outputs, which head dims up to 64 leave.
#define SA_MT (SA_D <= 64 && SA_DV <= 64 ? 2 : 1)
#define SA_BN 64            // keys a step
#define SA_LDK (SA_D + 8)   // a query's or key's row in shared memory
#define SA_LDV (SA_DV + 8)  // a value's row

// c += a b on the tensor cores: a 16 x 16 tile of the first operand (row-major fragments), a
// 16 x 8 tile of the second (column-major), c a 16 x 8 tile of float32.
SA_FN void sa_mma(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." SA_MMA_TYPES ".f32 {%0, %1, %2, %3}, "
               "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// 2^x by the special function unit (ex2.approx: 2 ulp; 0 at -inf); log2 e for its argument.
SA_FN float sa_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
#define SA_LOG2E 1.4426950408889634f

SA_FN uint32_t sa_word_at(const uint16_t* p) { return *reinterpret_cast<const uint32_t*>(p); }

SA_FN uint32_t sa_shared(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

// Four 8 x 8 tiles of 16-bit elements from shared memory, lane l naming row l % 8 of tile
// l / 8: lane 4g + t gets row g, elements 2t and 2t + 1 of each (TRANS: of each transposed).
template <bool TRANS>
SA_FN void sa_ldmatrix4(uint32_t* r, const uint16_t* p) {
  if (TRANS)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(sa_shared(p)));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(sa_shared(p)));
}

// 16 bytes from global into shared memory without waiting for them; zeros where !real.
SA_FN void sa_copy16(uint16_t* s, const uint16_t* g, bool real) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
               :
               : "r"(sa_shared(s)), "l"(g), "r"(real ? 16 : 0));
}
SA_FN void sa_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Until every group of copies but the newest is in shared memory (this thread's).
SA_FN void sa_wait_but_newest() { asm volatile("cp.async.wait_group 1;\n" ::); }

// A ROWS x COLS tile, element (r, c) read from base + r * rs + c * cs, into s[r * ld + c]; rows
// from `valid` on are zeros. vec: cs is 1 and every row starts 16 bytes aligned, so that 8
// elements move at once, asynchronously (the caller commits and waits); else element by
// element, here and now. Neighbouring threads take a row's neighbouring 8 elements.
template <int ROWS, int COLS>
SA_FN void sa_tile(uint16_t* s, int ld, const uint16_t* base, int64_t rs, int64_t cs,
                   int64_t valid, bool vec) {
  if (vec) {
    for (int c = threadIdx.x; c < ROWS * COLS / 8; c += blockDim.x) {
      const int r = c / (COLS / 8), k = (c % (COLS / 8)) * 8;
      const bool real = r < valid;
      sa_copy16(s + r * ld + k, real ? base + r * rs + k : base, real);
    }
  } else {
    for (int c = threadIdx.x; c < ROWS * COLS; c += blockDim.x) {
      const int r = c / COLS, k = c % COLS;
      s[r * ld + k] = r < valid ? base[r * rs + k * cs] : (uint16_t)0;
    }
  }
}

template <int MT>
static __global__ void __launch_bounds__(128) sa_attention(SaArgs a, bool vq, bool vk, bool vv) {
  constexpr int BM = 64 * MT;  // queries a block
  extern __shared__ __align__(16) uint16_t sa_smem[];
  uint16_t* qs = sa_smem;                  // BM x SA_LDK
  uint16_t* ks = qs + BM * SA_LDK;      // two stages of SA_BN x SA_LDK
  uint16_t* vs = ks + 2 * SA_BN * SA_LDK;  // two stages of SA_BN x SA_LDV
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;  // a fragment's row group and the thread in it
  // This thread's rows of the block in m-tile mt: r0 + 16 mt and r0 + 16 mt + 8.
  const int r0 = warp * 16 * MT + g;
  const int li = lane & 7, lm = lane >> 3;  // the row and the tile this lane names to ldmatrix
  const int64_t m0 = (int64_t)blockIdx.x * BM;
  const int64_t steps = (a.Lk + SA_BN - 1) / SA_BN;
  const uint16_t* q = reinterpret_cast<const uint16_t*>(a.q);
  const uint16_t* kt = reinterpret_cast<const uint16_t*>(a.kt);
  const uint16_t* v = reinterpret_cast<const uint16_t*>(a.v);
  for (int64_t bh = blockIdx.y; bh < a.B * a.H; bh += gridDim.y) {
    const int64_t b = bh / a.H, h = bh % a.H;
    const uint16_t* kbase = kt + b * a.ks[0] + h * a.ks[1];
    const uint16_t* vbase = v + b * a.vs[0] + h * a.vs[1];
    // The keys and values of step st into stage st % 2.
    const auto load = [&](int64_t st) {
      const int64_t n0 = st * SA_BN;
      sa_tile<SA_BN, SA_D>(ks + (st & 1) * SA_BN * SA_LDK, SA_LDK, kbase + n0 * a.ks[3], a.ks[3],
                           a.ks[2], a.Lk - n0, vk);
      sa_tile<SA_BN, SA_DV>(vs + (st & 1) * SA_BN * SA_LDV, SA_LDV, vbase + n0 * a.vs[2],
                            a.vs[2], a.vs[3], a.Lk - n0, vv);
    };
    __syncthreads();  // the previous (batch, head)'s reads of shared memory are done
    sa_tile<BM, SA_D>(qs, SA_LDK, q + b * a.qs[0] + h * a.qs[1] + m0 * a.qs[2], a.qs[2],
                         a.qs[3], a.Lq - m0, vq);
    sa_commit();
    load(0);
    sa_commit();
    sa_wait_but_newest();  // the queries
    __syncthreads();
    uint32_t qf[MT][SA_D / 16][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int kk = 0; kk < SA_D / 16; ++kk) {
        const uint16_t* p = qs + (r0 + 16 * mt) * SA_LDK + kk * 16 + 2 * t;
        qf[mt][kk][0] = sa_word_at(p);
        qf[mt][kk][1] = sa_word_at(p + 8 * SA_LDK);
        qf[mt][kk][2] = sa_word_at(p + 8);
        qf[mt][kk][3] = sa_word_at(p + 8 * SA_LDK + 8);
      }
    }
    float o[MT][SA_DV / 8][4];
    float mx[MT][2], l[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int dt = 0; dt < SA_DV / 8; ++dt) {
        o[mt][dt][0] = o[mt][dt][1] = o[mt][dt][2] = o[mt][dt][3] = 0.0f;
      }
      mx[mt][0] = mx[mt][1] = -INFINITY;
      l[mt][0] = l[mt][1] = 0.0f;
    }
    for (int64_t st = 0; st < steps; ++st) {
      if (st + 1 < steps) load(st + 1);  // into the stage the last step read
      sa_commit();                         // (empty on the last step)
      sa_wait_but_newest();                // this step's keys and values
      __syncthreads();
      const uint16_t* kst = ks + (st & 1) * SA_BN * SA_LDK;
      const uint16_t* vst = vs + (st & 1) * SA_BN * SA_LDV;
      const int64_t n0 = st * SA_BN;
#if SA_MASK
      // A step whose keys the mask hides from every query of the block adds nothing to any
      // row: no maximum, no exponential, no product. Rows and keys past the end count as hidden.
      bool hidden = true;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int nt = 0; nt < SA_BN / 8; ++nt) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int64_t i = m0 + r0 + 16 * mt + (e >> 1) * 8, j = n0 + nt * 8 + 2 * t + (e & 1);
            hidden = hidden && (i >= a.Lq || j >= a.Lk || sa_hidden(a, b, h, i, j));
          }
        }
      }
      if (__syncthreads_and(hidden)) continue;  // nothing read this stage: no barrier owed
#endif
      // The scores of this warp's queries and the step's 64 keys. One ldmatrix gives the
      // second operand of two neighbouring 8-key tiles: tile m of lane l is keys
      // 16 np + 8 (m / 2) + (l % 8), dims 16 kk + 8 (m % 2).
      float s[MT][SA_BN / 8][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int nt = 0; nt < SA_BN / 8; ++nt) {
          s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.0f;
        }
      }
#pragma unroll
      for (int kk = 0; kk < SA_D / 16; ++kk) {
#pragma unroll
        for (int np = 0; np < SA_BN / 16; ++np) {
          uint32_t kf[4];
          sa_ldmatrix4<false>(kf, kst + (np * 16 + (lm >> 1) * 8 + li) * SA_LDK + kk * 16 +
                                      (lm & 1) * 8);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            sa_mma(s[mt][2 * np], qf[mt][kk], kf[0], kf[1]);
            sa_mma(s[mt][2 * np + 1], qf[mt][kk], kf[2], kf[3]);
          }
        }
      }
      // Whether the step's keys and the block's queries all lie within the lengths (all but
      // the last step and block where a length is no multiple of them): then no score's
      // indices are checked.
      const bool inside = n0 + SA_BN <= a.Lk && m0 + BM <= a.Lq;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        // f of each score; a key past the end scores -inf. The tensors f reads are read at the
        // last query for rows past the end, whose results nothing stores.
        if (inside) {
#pragma unroll
          for (int nt = 0; nt < SA_BN / 8; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              s[mt][nt][e] = sa_score(a, s[mt][nt][e], b, h, m0 + r0 + 16 * mt + (e >> 1) * 8,
                                      n0 + nt * 8 + 2 * t + (e & 1));
            }
          }
        } else {
#pragma unroll
          for (int nt = 0; nt < SA_BN / 8; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int64_t i = m0 + r0 + 16 * mt + (e >> 1) * 8,
                            j = n0 + nt * 8 + 2 * t + (e & 1);
              s[mt][nt][e] = j < a.Lk ? sa_score(a, s[mt][nt][e], b, h,
                                                 i < a.Lq ? i : a.Lq - 1, j)
                                      : -INFINITY;
            }
          }
        }
        // The online softmax of each of the thread's two rows: the 4 threads of a row group
        // hold its 64 scores between them.
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
          float top = mx[mt][hr];
#pragma unroll
          for (int nt = 0; nt < SA_BN / 8; ++nt)
            top = fmaxf(top, fmaxf(s[mt][nt][2 * hr], s[mt][nt][2 * hr + 1]));
          top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 1));
          top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 2));
          // A row masked so far has nothing to shift by: its exponentials are 0. e^(x - top)
          // is 2^(x log2 e - top log2 e), one fused multiply-add and the exponential a score.
          const float shift = (top == -INFINITY ? 0.0f : top) * SA_LOG2E;
          const float alpha = sa_exp2(fmaf(mx[mt][hr], SA_LOG2E, -shift));
          mx[mt][hr] = top;
          float sum = 0.0f;
#pragma unroll
          for (int nt = 0; nt < SA_BN / 8; ++nt) {
            s[mt][nt][2 * hr] = sa_exp2(fmaf(s[mt][nt][2 * hr], SA_LOG2E, -shift));
            s[mt][nt][2 * hr + 1] = sa_exp2(fmaf(s[mt][nt][2 * hr + 1], SA_LOG2E, -shift));
            sum += s[mt][nt][2 * hr] + s[mt][nt][2 * hr + 1];
          }
          l[mt][hr] = l[mt][hr] * alpha + sum;  // this thread's part of the row's sum
#pragma unroll
          for (int dt = 0; dt < SA_DV / 8; ++dt) {
            o[mt][dt][2 * hr] *= alpha;
            o[mt][dt][2 * hr + 1] *= alpha;
          }
        }
      }
      // o += P V: two neighbouring 16 x 8 tiles of scores are one 16 x 16 first operand. One
      // transposing ldmatrix gives the second operand of two neighbouring 8-dim tiles: tile m
      // of lane l is keys 16 kc + 8 (m % 2) + (l % 8), dims 16 dp + 8 (m / 2).
#pragma unroll
      for (int kc = 0; kc < SA_BN / 16; ++kc) {
        uint32_t pa[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          pa[mt][0] = sa_word(s[mt][2 * kc][0], s[mt][2 * kc][1], (const T*)0);
          pa[mt][1] = sa_word(s[mt][2 * kc][2], s[mt][2 * kc][3], (const T*)0);
          pa[mt][2] = sa_word(s[mt][2 * kc + 1][0], s[mt][2 * kc + 1][1], (const T*)0);
          pa[mt][3] = sa_word(s[mt][2 * kc + 1][2], s[mt][2 * kc + 1][3], (const T*)0);
        }
#pragma unroll
        for (int dp = 0; dp < SA_DV / 16; ++dp) {
          uint32_t vf[4];
          sa_ldmatrix4<true>(vf, vst + (kc * 16 + (lm & 1) * 8 + li) * SA_LDV + dp * 16 +
                                     (lm >> 1) * 8);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            sa_mma(o[mt][2 * dp], pa[mt], vf[0], vf[1]);
            sa_mma(o[mt][2 * dp + 1], pa[mt], vf[2], vf[3]);
          }
        }
      }
      __syncthreads();  // every warp is done with this stage before it is refilled
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        float sum = l[mt][hr];
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        const int64_t i = m0 + r0 + 16 * mt + hr * 8;
        if (i >= a.Lq) continue;
        // A row masked whole is NaN, as torch's softmax makes it: 0 times 1 / 0.
        const float inv = 1.0f / sum;
        T* row = a.out + (bh * a.Lq + i) * SA_DV;
#pragma unroll
        for (int dt = 0; dt < SA_DV / 8; ++dt) {
          *reinterpret_cast<uint32_t*>(row + dt * 8 + 2 * t) =
              sa_word(o[mt][dt][2 * hr] * inv, o[mt][dt][2 * hr + 1] * inv, (const T*)0);
        }
      }
    }
  }
}

// Whether a tensor's rows may be read 16 bytes at a time: its elements along a row are
// neighbours, and every row starts 16 bytes aligned.
static bool sa_rows16(const void* p, int64_t sb, int64_t sh, int64_t sr, int64_t se) {
  return se == 1 && reinterpret_cast<uintptr_t>(p) % 16 == 0 && sb % 8 == 0 && sh % 8 == 0 &&
         sr % 8 == 0;
}
)";

// The configuration: -1, m-tiles a warp by the head dims (SA_MT); 1 or 2, that many (2 only
// where SA_MT is).
const char* const kCudaLaunch = R"(
static int sa_config = -1;
extern "C" int fused_attention_config(int64_t config) {
  sa_config = config == 1 || config == 2 ? (int)config : -1;
  return 0;
}

template <int MT>
static int sa_launch(const SaArgs& a, bool vq, bool vk, bool vv, cudaStream_t st) {
  const int64_t tiles = (a.Lq + 64 * MT - 1) / (64 * MT);
  if (tiles > INT32_MAX) return (int)cudaErrorInvalidValue;
  const size_t bytes = sizeof(uint16_t) * ((64 * MT + 2 * SA_BN) * SA_LDK + 2 * SA_BN * SA_LDV);
  const cudaError_t e = cudaFuncSetAttribute(
      sa_attention<MT>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
  if (e != cudaSuccess) return (int)e;
  const dim3 grid((unsigned)tiles, (unsigned)(a.B * a.H < 65535 ? a.B * a.H : 65535));
  sa_attention<MT><<<grid, 128, bytes, st>>>(a, vq, vk, vv);
  return (int)cudaGetLastError();
}
)";

std::string cuda_source(const AttentionPlan& plan, const std::string& head) {
  std::string args = "struct SaArgs {\n  const T* q;\n  const T* kt;\n  const T* v;\n  T* out;\n";
  std::string fill = "  a.q = q;\n  a.kt = kt;\n  a.v = v;\n  a.out = out;\n";
  for (std::size_t k = 0; k < plan.inputs.size(); ++k) {
    args += "  const " + element_type(plan.inputs[k].dtype) + "* p_in" + n(k) + ";\n";
    fill += "  a.p_in" + n(k) + " = p_in" + n(k) + ";\n";
  }
  args += "  int64_t B, H, Lq, Lk;\n  int64_t qs[4], ks[4], vs[4];\n";
  fill += "  a.B = B;\n  a.H = H;\n  a.Lq = Lq;\n  a.Lk = Lk;\n";
  for (int d = 0; d < 4; ++d) {
    fill += "  a.qs[" + n(d) + "] = q" + n(d) + ";\n  a.ks[" + n(d) + "] = k" + n(d) +
            ";\n  a.vs[" + n(d) + "] = v" + n(d) + ";\n";
  }
  for (std::size_t k = 0; k < plan.inputs.size(); ++k) {
    args += "  int64_t e" + n(k) + "_0, e" + n(k) + "_1, e" + n(k) + "_2, e" + n(k) + "_3;\n";
    for (int d = 0; d < 4; ++d) {
      fill += "  a.e" + n(k) + "_" + n(d) + " = e" + n(k) + "_" + n(d) + ";\n";
    }
  }
  args += "};\n\n";
  std::string hidden = "#define SA_MASK " + std::string(plan.mask >= 0 ? "1" : "0") + "\n";
  if (plan.mask >= 0) {
    const std::string e = "a.e" + n(plan.mask) + "_";
    hidden +=
        "// Whether f's last op, a masked_fill by -inf, hides key j from query i: its score is\n"
        "// -inf whatever Q and K are.\n"
        "SA_FN bool sa_hidden(const SaArgs& a, int64_t b, int64_t h, int64_t i, int64_t j) {\n"
        "  return a.p_in" +
        n(plan.mask) + "[b * " + e + "0 + h * " + e + "1 + i * " + e + "2 + j * " + e +
        "3];\n}\n\n";
  }
  const std::string score =
      hidden +
      "// f: the score s of query i and key j of (batch, head) (b, h) as the softmax reads it.\n"
      "SA_FN float sa_score(const SaArgs& a, float s, int64_t b, int64_t h, int64_t i, int64_t "
      "j) {\n" +
      score_lines(plan, "a.", "  ") + "  return " + plan.score + ";\n}\n\n";
  return head +
         "#include <cuda_runtime.h>\n\n"
         "#define SA_FN static __device__ __forceinline__\n" +
         dtype_helpers("cuda") + kExpressionHelpers + "typedef " + element_type(plan.dtype) +
         " T;\n#define SA_D " + n(plan.head_dim) + "\n#define SA_DV " + n(plan.value_dim) +
         "\n#define SA_MMA_TYPES \"" + (plan.dtype == "bfloat16" ? "bf16.bf16" : "f16.f16") +
         "\"\n\n" + args + score + kCudaKernel + kCudaLaunch +
         "\nextern \"C\" int fused_attention(" + entry_params(plan) +
         ") {\n"
         "  cudaStream_t st = (cudaStream_t)stream;\n"
         "  const int64_t rows = B * H * Lq;\n"
         "  if (rows == 0) return 0;\n"
         "  if (Lk == 0)  // no keys: softmax(empty) @ V(empty) is zeros\n"
         "    return (int)cudaMemsetAsync(out, 0, sizeof(T) * rows * SA_DV, st);\n"
         "  SaArgs a;\n" +
         fill +
         "  const int mt = sa_config > 0 ? sa_config : SA_MT;\n"
         "  const bool vq = sa_rows16(q, q0, q1, q2, q3), vk = sa_rows16(kt, k0, k1, k3, k2),\n"
         "             vv = sa_rows16(v, v0, v1, v2, v3);\n"
         "#if SA_MT == 2  // two m-tiles a warp spill past head dims of 64: not built there\n"
         "  return mt == 2 ? sa_launch<2>(a, vq, vk, vv, st) : sa_launch<1>(a, vq, vk, vv, st);\n"
         "#else\n"
         "  (void)mt;\n"
         "  return sa_launch<1>(a, vq, vk, vv, st);\n"
         "#endif\n"
         "}\n";
}

}  // namespace

std::string attention_kernel_source(const AttentionPlan& plan, const std::string& device) {
  const std::string head = "// Generated by cuda-agent's synthesizer: " + join(plan.ops, ", ") +
                           " as one attention kernel; the scores never leave the chip.\n"
                           "#include <math.h>\n#include <stdint.h>\n";
  return device == "cuda" ? cuda_source(plan, head) : cpu_source(plan, head);
}

std::string attention_model_source(const Graph& graph, const AttentionPlan& plan) {
  const std::size_t extras = plan.inputs.size();
  std::vector<int> reads = {plan.q, plan.kt, plan.v};
  for (const ElementInput& in : plan.inputs) reads.push_back(in.value);
  return "\"\"\"Generated by cuda-agent's synthesizer: " + join(plan.ops, ", ") +
         " in one attention kernel (kernels/).\"\"\"\n\n"
         "import torch\nimport torch.nn as nn\n\nfrom utils.kernels import load\n\n"
         "lib = load()\n"
         "fused_attention = lib.bind(\"fused_attention\", *[\"tensor\"] * " +
         n(4 + extras) + ", *[\"i64\"] * " + n(16 + 4 * extras) + ", \"stream\")\n" +
         model_config_source("fused_attention") + "HEAD_DIM, VALUE_DIM = " + n(plan.head_dim) +
         ", " + n(plan.value_dim) +
         "  # the kernel's, fixed when it was written\n\n\n"
         "def strides4(own, stride, shape):\n"
         "    \"\"\"The strides of a tensor of shape own and strides stride against shape, which "
         "it\n"
         "    broadcasts to, padded in front to 4 dims: 0 along a dim it lacks or has once.\"\"\"\n"
         "    offset = len(shape) - len(own)\n"
         "    strides = [0] * (4 - len(shape))\n"
         "    for k, size in enumerate(shape):\n"
         "        mine = own[k - offset] if k >= offset else 1\n"
         "        if mine not in (1, size):\n"
         "            raise ValueError(f\"a tensor of shape {tuple(own)} does not broadcast to "
         "\"\n"
         "                             f\"{tuple(shape)}\")\n"
         "        strides.append(stride[k - offset] if mine != 1 else 0)\n"
         "    return strides\n\n\n"
         "def launch_sizes(shapes, strides):\n"
         "    \"\"\"out's shape and the kernel's sizes after it (batch, heads, queries, keys, "
         "then the\n"
         "    strides of q, k transposed, v and each extra input) for inputs of these shapes and\n"
         "    strides.\"\"\"\n"
         "    (q, kt, v, *extras), (sq, skt, sv, *sextras) = shapes, strides\n"
         "    if q[-1] != HEAD_DIM or v[-1] != VALUE_DIM:\n"
         "        raise ValueError(f\"the kernel was written for a head dim of {HEAD_DIM} and \"\n"
         "                         f\"{VALUE_DIM}, not {q[-1]} and {v[-1]}\")\n"
         "    batch = (*torch.broadcast_shapes(q[:-2], kt[:-2]),)\n"
         "    lq, lk = q[-2], kt[-1]\n"
         "    b, h = ([1, 1] + list(batch))[-2:]\n"
         "    sizes = [b, h, lq, lk, *strides4(q, sq, batch + (lq, HEAD_DIM)),\n"
         "             *strides4(kt, skt, batch + (HEAD_DIM, lk)),\n"
         "             *strides4(v, sv, batch + (lk, VALUE_DIM))]\n"
         "    for own, stride in zip(extras, sextras):\n"
         "        sizes += strides4(own, stride, batch + (lq, lk))\n"
         "    return batch + (lq, VALUE_DIM), sizes\n\n\n" +
         model_class_head(graph, reads, kLayoutMemoInit) +
         layout_memo_lines("out_shape, sizes", "launch_sizes") +
         "        out = torch.empty(out_shape, dtype=inputs[0].dtype, device=inputs[0].device)\n"
         "        fused_attention(*inputs, out, *sizes)\n"
         "        return out" +
         graph.output_view + "\n";
}

Status synthesize_attention(const Graph& graph, const std::string& device, Candidate* candidate) {
  AttentionPlan plan;
  if (Status s = plan_attention(graph, &plan); !s.ok()) return s;
  const std::string kernel = attention_kernel_source(plan, device);
  candidate->files["model_new.py"] = attention_model_source(graph, plan);
  candidate
      ->files[device == "cuda" ? "kernels/fused_attention.cu" : "kernels/fused_attention.cpp"] =
      kernel;
  candidate->configs = {{-1, "m-tiles a warp by the head dims, 64 keys a step"}};
  // Two m-tiles a warp hold twice the scores and outputs in registers: past head dims of 64
  // they spill (ptxas: over 900 bytes a thread at 128), so there the kernel takes one alone.
  if (device == "cuda" && plan.head_dim <= 64 && plan.value_dim <= 64) {
    candidate->configs.push_back({1, "64 queries a block (16 a warp), 64 keys a step"});
    candidate->configs.push_back({2, "128 queries a block (32 a warp), 64 keys a step"});
  }
  candidate->pattern = sha256_hex(kernel);
  candidate->shape_class = "attention of head dim " + n(plan.head_dim);
  return Status::OK();
}

}  // namespace cuda_agent::synth
