#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "task/op_family.h"

namespace cuda_agent {
namespace task_synth {

namespace {

// Normalizing or contracting fewer values than this is not worth a task.
constexpr std::int64_t kMinNormalizedExtent = 16;
// A reduction that leaves fewer values than this per batch unit ends the chain.
constexpr std::int64_t kClosingElements = 64;
// GEMM output widths, and the widest inner dimension a GEMM takes.
constexpr std::int64_t kGemmWidths[] = {1024, 2048, 4096};
constexpr std::int64_t kMaxGemmInner = 8192;
constexpr std::int64_t kMaxConvChannels = 256;

/// Python's spelling of a dim argument: -1 for the last axis, which reads better than its index.
std::string dim_arg(int axis, int rank) { return axis == rank - 1 ? "-1" : std::to_string(axis); }

/// The mask of a term's constant axes once axis is reduced away.
unsigned without_axis(unsigned mask, int axis) {
  unsigned low = mask & ((1u << axis) - 1);
  return low | ((mask >> (axis + 1)) << axis);
}

/// Whether normalizing over `axes` would cancel a pending term of a kind it removes.
bool cancels_pending(const TensorState& t, unsigned axes, bool additive, bool multiplicative) {
  return std::any_of(t.pending.begin(), t.pending.end(), [&](const AffineTerm& term) {
    return (term.additive ? additive : multiplicative) && (term.const_axes & axes) == axes;
  });
}

/// Whether a max over n values would mostly return a pile's bound: most groups of n hold one.
bool max_hits_pile(double pile, double n) { return pile * n >= 3; }

// --- reductions ----------------------------------------------------------------------------------

enum class ReduceKind { kSum, kMean, kAmax, kAmin, kLogSumExp, kNorm };

struct Reduction {
  const char* name;
  const char* function;
  const char* summary;
  ReduceKind kind;
  int kernels;
};

constexpr Reduction kReductions[] = {
    {"sum", "torch.sum", "sum", ReduceKind::kSum, 1},
    {"mean", "torch.mean", "mean", ReduceKind::kMean, 1},
    {"amax", "torch.amax", "max", ReduceKind::kAmax, 1},
    {"amin", "torch.amin", "min", ReduceKind::kAmin, 1},
    {"logsumexp", "torch.logsumexp", "logsumexp", ReduceKind::kLogSumExp, 4},
    {"norm", "torch.linalg.vector_norm", "L2 norm", ReduceKind::kNorm, 1},
};

bool is_linear(ReduceKind kind) { return kind == ReduceKind::kSum || kind == ReduceKind::kMean; }

std::vector<OpParams> reduce_variants(const Reduction& r, const Chain& c) {
  const TensorState& t = c.tensor();
  bool sums = r.kind != ReduceKind::kAmax && r.kind != ReduceKind::kAmin;
  std::vector<OpParams> out;
  for (int axis = 1; axis < rank_of(c); ++axis) {
    auto n = static_cast<double>(extent_at(c, axis));
    if (n < kMinReducedExtent) continue;
    // A max over values that often sit on a bound returns the bound.
    if (r.kind == ReduceKind::kAmax && max_hits_pile(t.top_pile, n)) continue;
    if (r.kind == ReduceKind::kAmin && max_hits_pile(t.bottom_pile, n)) continue;
    // Summing rows that a softmax or layer norm fixed gives a constant.
    if (sums && axis == t.fixed_sum_axis) continue;
    // Summing a bias along the axis it varies on leaves one number of it: the rest is wasted.
    bool collapses_bias = std::any_of(t.pending.begin(), t.pending.end(), [&](const AffineTerm& a) {
      return a.additive && !(a.const_axes >> axis & 1u);
    });
    if (is_linear(r.kind) && collapses_bias) continue;
    for (bool keepdim : {false, true}) out.push_back({.axis = axis, .keepdim = keepdim});
  }
  return out;
}

Values reduce_values(ReduceKind kind, const Values& in, double n) {
  switch (kind) {
    case ReduceKind::kSum:
      return sum_of(in, n);
    case ReduceKind::kMean:
      return map_values(sum_of(in, n), [n](double x) { return x / n; });
    case ReduceKind::kAmax:
      return max_of(in, n);
    case ReduceKind::kAmin:
      return negated(max_of(negated(in), n));
    case ReduceKind::kLogSumExp:
      return logsumexp_of(in, n);
    case ReduceKind::kNorm: {
      Values squares = map_values(in, [](double x) { return x * x; });
      return map_values(sum_of(squares, n), [](double x) { return std::sqrt(std::max(0.0, x)); });
    }
  }
  return in;
}

/// Piles after reducing n values: a max lands on the top bound when any of them sits there; a
/// sum or mean stays on a bound only when all of them do.
void reduce_piles(ReduceKind kind, double n, TensorState* t) {
  double top = t->top_pile, bottom = t->bottom_pile;
  switch (kind) {
    case ReduceKind::kAmax:
      t->top_pile = 1 - std::pow(1 - top, n);
      t->bottom_pile = std::pow(bottom, n);
      break;
    case ReduceKind::kAmin:
      t->top_pile = std::pow(top, n);
      t->bottom_pile = 1 - std::pow(1 - bottom, n);
      break;
    case ReduceKind::kSum:
    case ReduceKind::kMean:
      t->top_pile = std::pow(top, n);
      t->bottom_pile = std::pow(bottom, n);
      break;
    default:
      t->top_pile = t->bottom_pile = 0;
  }
}

/// Where the fixed-sum axis is after reducing another one: sums and means keep it (renumbered
/// when an axis before it goes), other reductions mix it away.
int reduced_sum_axis(int fixed, ReduceKind kind, const OpParams& p) {
  if (fixed < 0 || !is_linear(kind)) return -1;
  return !p.keepdim && p.axis < fixed ? fixed - 1 : fixed;
}

void apply_reduce(const Reduction& r, const OpParams& p, Chain* chain) {
  std::int64_t n_in = chain->elements();
  int rank = rank_of(*chain);
  Dim dim = chain->tensor().dims[p.axis];
  std::int64_t n = chain->extent(dim);
  std::string where = p.axis == rank - 1 ? "the last dim" : "dim " + std::to_string(p.axis);
  auto [out, step, number] = open_step(
      chain, r.name, std::string(r.summary) + " over " + where + (p.keepdim ? ", keeping it" : ""));
  step.expr = std::string(r.function) + "(x, dim=" + dim_arg(p.axis, rank) +
              (p.keepdim ? ", keepdim=True)" : ")");
  step.signature += "(dim=" + std::to_string(p.axis) + (p.keepdim ? ",keepdim)" : ")");
  step.unit_bytes = 4.0 * static_cast<double>(n_in) * r.kernels + 4.0 * n_in / n;
  step.kernels = r.kernels;
  pin(chain, dim);
  out.values = reduce_values(r.kind, out.values, static_cast<double>(n));
  reduce_piles(r.kind, static_cast<double>(n), &out);
  std::vector<AffineTerm> kept;
  for (AffineTerm term : out.pending) {
    bool commutes = is_linear(r.kind) || r.kind == ReduceKind::kAmax ||
                    r.kind == ReduceKind::kAmin ||
                    (r.kind == ReduceKind::kLogSumExp && term.additive) ||
                    (r.kind == ReduceKind::kNorm && !term.additive);
    if (!commutes) continue;
    term.const_axes =
        p.keepdim ? term.const_axes | (1u << p.axis) : without_axis(term.const_axes, p.axis);
    kept.push_back(term);
  }
  out.pending = std::move(kept);
  // Only sums and means over another axis keep the last axis's sums fixed.
  out.fixed_sum_axis = reduced_sum_axis(out.fixed_sum_axis, r.kind, p);
  out.nonnegative =
      (out.nonnegative && r.kind != ReduceKind::kLogSumExp) || r.kind == ReduceKind::kNorm;
  if (p.keepdim) {
    out.dims[p.axis] = Dim{-1, 1};  // a size-1 axis, which no constant names
  } else {
    out.dims.erase(out.dims.begin() + p.axis);
  }
  out.closed = out.dims.size() <= 1 || n_in / n < kClosingElements;
}

// --- softmax and normalizations ----------------------------------------------------------------

std::vector<OpParams> softmax_variants(const Chain& c) {
  int last = last_axis(c);
  if (last < 1 || extent_at(c, last) < kMinReducedExtent) return {};
  if (last_op_is(c, {"softmax", "log_softmax"})) return {};
  if (cancels_pending(c.tensor(), 1u << last, /*additive=*/true, /*multiplicative=*/false)) {
    return {};
  }
  return {OpParams{}};
}

void apply_softmax(bool log, Chain* chain) {
  std::int64_t n = chain->elements();
  int last = last_axis(*chain);
  Dim dim = chain->tensor().dims[last];
  double d = static_cast<double>(chain->extent(dim));
  auto [out, step, number] =
      open_step(chain, log ? "log_softmax" : "softmax",
                log ? "log-softmax over the last dim" : "softmax over the last dim");
  step.expr = std::string(log ? "torch.log_softmax" : "torch.softmax") + "(x, dim=-1)";
  elementwise_cost(&step, n);
  pin(chain, dim);
  // Over many classes the denominator is d times the mean of exp: each value maps on its own.
  double shift = out.values.samples.back();
  double log_denominator = shift + std::log(d * mean_exp_shifted(out.values, shift));
  out.values = map_values(out.values, [&](double x) {
    return log ? x - log_denominator : std::exp(x - log_denominator);
  });
  out.nonnegative = !log;
  out.pending.clear();
  out.fixed_sum_axis = last;
}

bool follows_a_normalization(const Chain& c) {
  return last_op_is(c, {"layer_norm", "rms_norm", "group_norm", "batch_norm"});
}

/// Whether a normalization would leave the values nearly as they are: the output would be
/// within tolerance of the input almost everywhere.
bool already_normalized(const Values& v, bool centered) {
  double scale = centered ? v.spread() : v.rms();
  return std::fabs(scale - 1) < 0.1 && (!centered || std::fabs(v.mean()) < 0.1);
}

/// Layer norm (centered) or RMS norm over the last axis, unless it would cancel a pending term
/// (a bias only when centered), follow another normalization or change almost nothing.
std::vector<OpParams> last_dim_norm_variants(const Chain& c, bool centered) {
  int last = last_axis(c);
  if (last < 1 || extent_at(c, last) < kMinNormalizedExtent || follows_a_normalization(c)) {
    return {};
  }
  if (cancels_pending(c.tensor(), 1u << last, /*additive=*/centered, /*multiplicative=*/true)) {
    return {};
  }
  if (already_normalized(c.tensor().values, centered)) return {};
  return {OpParams{}};
}

void apply_layer_norm(Chain* chain) {
  std::int64_t n = chain->elements();
  int last = last_axis(*chain);
  Dim dim = chain->tensor().dims[last];
  std::string size = chain->size_expr(dim);
  auto [out, step, number] = open_step(chain, "layer_norm", "layer norm over the last dim");
  step.init_lines = {"self.norm" + number + " = nn.LayerNorm(" + size + ")"};
  step.init_constants = {dim.constant};
  step.expr = "self.norm" + number + "(x)";
  elementwise_cost(&step, n);
  pin(chain, dim);
  out.values = normalized(out.values, /*centered=*/true, 1e-5);
  out.nonnegative = false;
  // Its own weight and bias follow the last axis.
  out.pending = {{true, all_but(last + 1, last)}, {false, all_but(last + 1, last)}};
  out.fixed_sum_axis = last;
}

void apply_rms_norm(Chain* chain) {
  std::int64_t n = chain->elements();
  int last = last_axis(*chain);
  Dim dim = chain->tensor().dims[last];
  std::string size = chain->size_expr(dim);
  auto [out, step, number] =
      open_step(chain, "rms_norm", "RMS norm over the last dim, with a learned weight");
  std::string weight = "self.rms" + number + "_weight";
  step.init_lines = {weight + " = nn.Parameter(torch.ones(" + size + "))"};
  step.init_constants = {dim.constant};
  step.expr = "x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * " + weight;
  // pow, mean, add, rsqrt, and two multiplications, each its own kernel in eager.
  step.unit_bytes = 4.0 * static_cast<double>(n) * 7;
  step.kernels = 6;
  pin(chain, dim);
  out.values = normalized(out.values, /*centered=*/false, 1e-6);
  out.pending = {{false, all_but(last + 1, last)}};
  out.fixed_sum_axis = last;
}

constexpr std::int64_t kGroupCounts[] = {2, 4, 8, 16, 32};

std::vector<OpParams> group_norm_variants(const Chain& c) {
  if (rank_of(c) != 4 || follows_a_normalization(c)) return {};
  if (cancels_pending(c.tensor(), 0b1110u, true, true)) return {};
  if (already_normalized(c.tensor().values, /*centered=*/true)) return {};
  std::int64_t channels = extent_at(c, 1);
  std::vector<OpParams> out;
  for (std::int64_t groups : kGroupCounts) {
    // At least two channels a group: with one, a per-channel bias before it would cancel.
    if (channels % groups != 0 || channels / groups < 2) continue;
    out.push_back({.size = groups});
  }
  return out;
}

void apply_group_norm(const OpParams& p, Chain* chain) {
  std::int64_t n = chain->elements();
  Dim dim = chain->tensor().dims[1];
  std::string channels = chain->size_expr(dim);
  auto [out, step, number] =
      open_step(chain, "group_norm", "group norm, " + std::to_string(p.size) + " groups");
  step.init_lines = {"self.gn" + number + " = nn.GroupNorm(" + std::to_string(p.size) + ", " +
                     channels + ")"};
  step.init_constants = {dim.constant};
  step.expr = "self.gn" + number + "(x)";
  step.signature += "(groups=" + std::to_string(p.size) + ")";
  elementwise_cost(&step, n, 2);
  pin(chain, dim);
  out.values = normalized(out.values, /*centered=*/true, 1e-5);
  out.nonnegative = false;
  out.pending = {{true, all_but(4, 1)}, {false, all_but(4, 1)}};
  out.fixed_sum_axis = -1;
}

std::vector<OpParams> batch_norm_variants(const Chain& c) {
  if (rank_of(c) != 4 || extent_at(c, 1) < 2 || follows_a_normalization(c)) return {};
  return {OpParams{}};
}

void apply_batch_norm(Chain* chain) {
  std::int64_t n = chain->elements();
  Dim dim = chain->tensor().dims[1];
  std::string c = chain->size_expr(dim);
  auto [out, step, number] =
      open_step(chain, "batch_norm", "batch norm in inference mode (fixed running statistics)");
  std::string bn = "bn" + number;
  // Random running statistics and affine weights: with the defaults (0, 1, 1, 0) the step would
  // be the identity. training=False keeps forward deterministic whatever mode the module is in.
  step.init_lines = {
      "self.register_buffer(\"" + bn + "_mean\", torch.randn(" + c + ") * 0.1)",
      "self.register_buffer(\"" + bn + "_var\", torch.rand(" + c + ") + 0.5)",
      "self." + bn + "_w = nn.Parameter(torch.rand(" + c + ") + 0.5)",
      "self." + bn + "_b = nn.Parameter(torch.randn(" + c + ") * 0.1)",
  };
  step.init_constants = {dim.constant};
  step.expr = "F.batch_norm(x, self." + bn + "_mean, self." + bn + "_var, self." + bn +
              "_w, self." + bn + "_b, training=False)";
  elementwise_cost(&step, n);
  pin(chain, dim);
  out.values = add_independent(times_positive_weights(out.values),
                               Values::normal(0, 0.15, /*noise_share=*/0));
  out.nonnegative = false;
  if (out.fixed_sum_axis == 1) out.fixed_sum_axis = -1;
  out.pending.push_back({true, all_but(4, 1)});
  out.pending.push_back({false, all_but(4, 1)});
}

// --- matrix products and convolution -----------------------------------------------------------

std::vector<OpParams> gemm_variants(const Chain& c) {
  int last = last_axis(c);
  if (last < 1) return {};
  std::int64_t k = extent_at(c, last);
  if (k < kMinNormalizedExtent || k > kMaxGemmInner) return {};
  std::vector<OpParams> out;
  for (std::int64_t width : kGemmWidths) out.push_back({.size = width});
  return out;
}

/// The dimension a GEMM or convolution produces: the input's own when the width is the same
/// (a square weight reads better), else a new constant.
Dim output_dim(Chain* chain, const Dim& in, std::int64_t width, const std::string& base) {
  if (chain->extent(in) == width) return in;
  return Dim{chain->add_constant(base, width), 1};
}

/// A GEMM's or a convolution's sizes: the axis it contracts, that axis's dimension before and
/// after, the inner extent k and the positions (rows, pixels) each computing a row of outputs.
struct Contraction {
  int axis = 0;
  Dim in;
  Dim out;
  double k = 0;
  double positions = 0;
  std::string in_size;
  std::string out_size;
};

/// Sizes a contraction of the current tensor's axis into width outputs, pinning the input's size
/// and adding a constant named base when the width is new.
Contraction contract_axis(Chain* chain, int axis, std::int64_t width, const std::string& base) {
  Contraction c;
  c.axis = axis;
  c.in = chain->tensor().dims[axis];
  c.k = static_cast<double>(chain->extent(c.in));
  c.positions = static_cast<double>(chain->elements()) / c.k;
  pin(chain, c.in);
  c.out = output_dim(chain, c.in, width, base);
  c.in_size = chain->size_expr(c.in);
  c.out_size = chain->size_expr(c.out);
  return c;
}

/// Opens a contraction's step: its weight needs both sizes, and its width tells it apart.
Opened open_contraction(Chain* chain, const Contraction& c, const std::string& op,
                        std::string summary, std::int64_t width) {
  Opened opened = open_step(chain, op, std::move(summary));
  opened.step.init_constants = {c.in.constant, c.out.constant};
  opened.step.signature.append("(").append(std::to_string(width)).append(")");
  return opened;
}

/// The tensor after a contraction: the new values and width, and nothing left of the input's
/// piles, sign or fixed sums.
void set_contracted(const Contraction& c, Values values, TensorState* out) {
  out->values = std::move(values);
  out->top_pile = out->bottom_pile = 0;
  out->dims[c.axis] = c.out;
  out->nonnegative = false;
  out->fixed_sum_axis = -1;
}

void gemm_cost(Step* step, const Contraction& c, double n) {
  step->unit_gemm_flops = 2 * c.positions * c.k * n;
  step->unit_bytes = 4 * c.positions * (c.k + n);
  step->fixed_bytes = 4 * c.k * n;
}

void apply_linear(const OpParams& p, Chain* chain) {
  Contraction c = contract_axis(chain, last_axis(*chain), p.size, "hidden");
  auto [out, step, number] = open_contraction(
      chain, c, "linear", "linear layer (nn.Linear): " + c.in_size + " -> " + c.out_size, p.size);
  step.init_lines = {"self.linear" + number + " = nn.Linear(" + c.in_size + ", " + c.out_size +
                     ")"};
  step.expr = "self.linear" + number + "(x)";
  gemm_cost(&step, c, static_cast<double>(p.size));
  // nn.Linear's default init draws U(-1/sqrt(k), 1/sqrt(k)): variance 1 / (3k) a weight.
  set_contracted(c, contracted(out.values, 1.0 / 3, 1 / (3 * c.k)), &out);
  out.pending = {{true, all_but(c.axis + 1, c.axis)}};  // its bias
}

void apply_matmul(const OpParams& p, Chain* chain) {
  Contraction c = contract_axis(chain, last_axis(*chain), p.size, "hidden");
  auto [out, step, number] =
      open_contraction(chain, c, "matmul",
                       "matmul with a learned weight: " + c.in_size + " -> " + c.out_size, p.size);
  std::string scale_base = c.in.divisor == 1 ? c.in_size : "(" + c.in_size + ")";
  step.init_lines = {"self.weight" + number + " = nn.Parameter(torch.randn(" + c.in_size + ", " +
                     c.out_size + ") * " + scale_base + " ** -0.5)"};
  step.expr = "x @ self.weight" + number;
  gemm_cost(&step, c, static_cast<double>(p.size));
  set_contracted(c, contracted(out.values, 1.0, 0), &out);
  // A factor constant along the contracted axis passes through; anything else mixes.
  std::erase_if(out.pending, [&](const AffineTerm& term) {
    return term.additive || !(term.const_axes >> c.axis & 1u);
  });
}

std::vector<OpParams> conv_variants(const Chain& c) {
  if (rank_of(c) != 4) return {};
  std::int64_t channels = extent_at(c, 1);
  if (channels < 3 || channels > kMaxConvChannels) return {};
  if (extent_at(c, 2) < 4 || extent_at(c, 3) < 4) return {};
  std::vector<OpParams> out;
  for (std::int64_t width : {channels, channels * 2, channels / 2}) {
    if (width < 8 || width > kMaxConvChannels) continue;
    out.push_back({.size = width});
  }
  return out;
}

void apply_conv(const OpParams& p, Chain* chain) {
  Contraction c = contract_axis(chain, 1, p.size, "out_channels");
  auto [out, step, number] = open_contraction(
      chain, c, "conv2d",
      "3x3 convolution, padding 1: " + c.in_size + " -> " + c.out_size + " channels", p.size);
  step.init_lines = {"self.conv" + number + " = nn.Conv2d(" + c.in_size + ", " + c.out_size +
                     ", 3, padding=1)"};
  step.expr = "self.conv" + number + "(x)";
  double c_out = static_cast<double>(p.size);
  step.unit_conv_flops = 2 * 9 * c.k * c_out * c.positions;
  step.unit_bytes = 4 * c.positions * (c.k + c_out);
  step.fixed_bytes = 4 * 9 * c.k * c_out;
  // Default init is U(-b, b) with b = 1 / sqrt(9 c_in), like nn.Linear's.
  set_contracted(c, contracted(out.values, 1.0 / 3, 1 / (27 * c.k)), &out);
  out.pending = {{true, all_but(4, 1)}};  // its bias
}

// --- pooling -------------------------------------------------------------------------------------

std::vector<OpParams> pool_variants(bool max, const Chain& c) {
  if (rank_of(c) != 4) return {};
  if (max && max_hits_pile(c.tensor().top_pile, 4)) return {};
  for (int axis : {2, 3}) {
    std::int64_t e = extent_at(c, axis);
    if (e % 2 != 0 || e < 8) return {};
  }
  return {OpParams{}};
}

void apply_pool(bool max, Chain* chain) {
  std::int64_t n = chain->elements();
  auto [out, step, number] = open_step(chain, max ? "max_pool2d" : "avg_pool2d",
                                       max ? "2x2 max pooling" : "2x2 average pooling");
  step.expr = std::string(max ? "F.max_pool2d" : "F.avg_pool2d") + "(x, 2)";
  step.unit_bytes = 4.0 * static_cast<double>(n) * 1.25;
  for (int axis : {2, 3}) {
    pin(chain, out.dims[axis]);  // the halving needs even sizes
    out.dims[axis].divisor *= 2;
  }
  ReduceKind kind = max ? ReduceKind::kAmax : ReduceKind::kMean;
  out.values = reduce_values(kind, out.values, 4);
  reduce_piles(kind, 4, &out);
  if (max) out.fixed_sum_axis = -1;
}

}  // namespace

std::vector<OpSpec> axis_ops() {
  std::vector<OpSpec> ops;
  for (const Reduction& r : kReductions) {
    ops.push_back({r.name, 2, [&r](const Chain& c) { return reduce_variants(r, c); },
                   [&r](const OpParams& p, Chain* c) { apply_reduce(r, p, c); }});
  }
  ops.push_back(
      {"softmax", 2, softmax_variants, ignoring_params([](Chain* c) { apply_softmax(false, c); })});
  ops.push_back({"log_softmax", 1, softmax_variants,
                 ignoring_params([](Chain* c) { apply_softmax(true, c); })});
  ops.push_back({"layer_norm", 3, [](const Chain& c) { return last_dim_norm_variants(c, true); },
                 ignoring_params(apply_layer_norm)});
  ops.push_back({"rms_norm", 3, [](const Chain& c) { return last_dim_norm_variants(c, false); },
                 ignoring_params(apply_rms_norm)});
  ops.push_back({"group_norm", 3, group_norm_variants, apply_group_norm});
  ops.push_back({"batch_norm", 2, batch_norm_variants, ignoring_params(apply_batch_norm)});
  ops.push_back({"linear", 4, gemm_variants, apply_linear});
  ops.push_back({"matmul", 3, gemm_variants, apply_matmul});
  ops.push_back({"conv2d", 4, conv_variants, apply_conv});
  ops.push_back({"max_pool2d", 2, [](const Chain& c) { return pool_variants(true, c); },
                 ignoring_params([](Chain* c) { apply_pool(true, c); })});
  ops.push_back({"avg_pool2d", 2, [](const Chain& c) { return pool_variants(false, c); },
                 ignoring_params([](Chain* c) { apply_pool(false, c); })});
  return ops;
}

}  // namespace task_synth
}  // namespace cuda_agent
