#include "task/op_library.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "task/op_family.h"

namespace cuda_agent {
namespace task_synth {

std::int64_t Chain::extent(const Dim& dim) const {
  return dim.constant < 0 ? 1 : constants[dim.constant].value / dim.divisor;
}

std::string Chain::size_expr(const Dim& dim) const {
  if (dim.constant < 0) return "1";
  const std::string& name = constants[dim.constant].name;
  return dim.divisor == 1 ? name : name + " // " + std::to_string(dim.divisor);
}

std::int64_t Chain::elements() const {
  std::int64_t n = 1;
  for (const Dim& dim : tensor().dims) n *= extent(dim);
  return n;
}

int Chain::add_constant(const std::string& base, std::int64_t value) {
  std::string name = base;
  for (int k = 2;; ++k) {
    bool taken = std::any_of(constants.begin(), constants.end(),
                             [&](const SizeConstant& c) { return c.name == name; });
    if (!taken) break;
    name = base + std::to_string(k);
  }
  constants.push_back({name, value, /*batch_like=*/false, /*pinned=*/true});
  return static_cast<int>(constants.size()) - 1;
}

// --- what the families share (task/op_family.h) -------------------------------------------------

bool last_op_is(const Chain& c, std::initializer_list<const char*> names) {
  if (c.steps.empty()) return false;
  for (const char* name : names) {
    if (c.steps.back().op == name) return true;
  }
  return false;
}

Opened open_step(Chain* chain, const std::string& op, std::string summary) {
  TensorState copy = chain->tensor();
  chain->history.push_back(std::move(copy));
  chain->steps.emplace_back();
  Step& step = chain->steps.back();
  step.op = op;
  step.signature = op;
  step.summary = std::move(summary);
  return {chain->history.back(), step, std::to_string(chain->steps.size())};
}

void elementwise_cost(Step* step, std::int64_t elements, int kernels) {
  step->unit_bytes = 8.0 * static_cast<double>(elements) * kernels;
  step->kernels = kernels;
}

std::string python_float(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

namespace {

constexpr int kMaxResiduals = 2;
constexpr double kResidualBalance = 4;

/// The parameter shape that broadcasts along axis: (d,) for the last axis, (c, 1, 1) for the
/// channels of NCHW.
std::string broadcast_shape(const Chain& c, int axis) {
  std::string shape = c.size_expr(c.tensor().dims[axis]);
  for (int i = axis + 1; i < rank_of(c); ++i) shape += ", 1";
  return shape;
}

/// A term's constant axes once the last two axes swap.
unsigned swap_last_two(unsigned mask, int rank) {
  unsigned a = (mask >> (rank - 1)) & 1u, b = (mask >> (rank - 2)) & 1u;
  mask &= ~((1u << (rank - 1)) | (1u << (rank - 2)));
  return mask | (a << (rank - 2)) | (b << (rank - 1));
}

/// Piles after an elementwise map: those the samples show now, and those an earlier bias or
/// weight smeared in the samples but that the map carried along.
void update_piles(TensorState* t, bool folds) {
  double carried_top = folds ? std::max(t->top_pile, t->bottom_pile) : t->top_pile;
  double carried_bottom = folds ? 0 : t->bottom_pile;
  t->top_pile = std::max(carried_top, pile_share(t->values, true));
  t->bottom_pile = std::max(carried_bottom, pile_share(t->values, false));
}

// --- elementwise unary operators ---------------------------------------------------------------

double gelu(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double silu(double x) { return x / (1 + std::exp(-x)); }
double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
double hardswish(double x) { return x * std::clamp(x + 3, 0.0, 6.0) / 6; }
double softplus(double x) { return x > 20 ? x : std::log1p(std::exp(x)); }
double elu(double x) { return x > 0 ? x : std::expm1(x); }
double leaky_relu(double x) { return x > 0 ? x : 0.1 * x; }
double relu(double x) { return std::max(0.0, x); }
double exp_clamped(double x) { return std::exp(std::min(x, 4.0)); }
double square(double x) { return x * x; }
double absolute(double x) { return std::fabs(x); }
double hyperbolic_tangent(double x) { return std::tanh(x); }

struct Unary {
  const char* name;
  const char* expr;
  const char* summary;
  double (*fn)(double);
  bool needs_sign;       // a no-op on nonnegative input
  bool nonnegative_out;  // every result is >= 0
  bool folds;            // not monotone: both bounds' piles may end on top
  int kernels;
};

constexpr Unary kUnaries[] = {
    {"relu", "torch.relu(x)", "ReLU", relu, true, true, false, 1},
    {"gelu", "F.gelu(x)", "GELU", gelu, false, false, false, 1},
    {"silu", "F.silu(x)", "SiLU", silu, false, false, false, 1},
    {"sigmoid", "torch.sigmoid(x)", "sigmoid", sigmoid, false, true, false, 1},
    {"tanh", "torch.tanh(x)", "tanh", hyperbolic_tangent, false, false, false, 1},
    {"hardswish", "F.hardswish(x)", "hardswish", hardswish, false, false, false, 1},
    {"softplus", "F.softplus(x)", "softplus", softplus, false, true, false, 1},
    {"elu", "F.elu(x)", "ELU", elu, true, false, false, 1},
    {"leaky_relu", "F.leaky_relu(x, 0.1)", "leaky ReLU, slope 0.1", leaky_relu, true, false, false,
     1},
    {"abs", "torch.abs(x)", "absolute value", absolute, true, true, true, 1},
    {"exp_clamped", "torch.exp(torch.clamp(x, max=4.0))", "exp of x clamped to at most 4",
     exp_clamped, false, true, false, 2},
    {"square", "torch.square(x)", "square", square, false, true, true, 1},
};

std::vector<OpParams> unary_variants(const Unary& u, const Chain& c) {
  if (u.needs_sign && c.tensor().nonnegative) return {};
  // square(abs(x)) is square(x): the abs would be wasted.
  if (std::string(u.name) == "square" && last_op_is(c, {"abs"})) return {};
  return {OpParams{}};
}

void apply_unary(const Unary& u, Chain* chain) {
  std::int64_t n = chain->elements();
  bool affine = acts_affinely(chain->tensor().values, u.fn);
  auto [out, step, number] = open_step(chain, u.name, u.summary);
  step.expr = u.expr;
  elementwise_cost(&step, n, u.kernels);
  out.values = map_values(out.values, u.fn);
  update_piles(&out, u.folds);
  // The remaining activations keep nonnegative input nonnegative.
  out.nonnegative = out.nonnegative || u.nonnegative_out;
  // Earlier affine terms no longer separate out of a nonlinear function.
  if (!affine) {
    out.pending.clear();
    out.fixed_sum_axis = -1;
  }
}

// --- clamp and the affine operators ------------------------------------------------------------

constexpr double kClampGrid[] = {-4, -2, -1, -0.5, -0.25, 0, 0.25, 0.5, 1, 2, 4, 8};

/// Bounds on a grid that cut into both tails but leave the middle: between the 5th and 40th
/// percentiles below, the 60th and 95th above.
std::vector<OpParams> clamp_variants(const Chain& c) {
  const Values& v = c.tensor().values;
  double low_min = v.quantile(0.05), low_max = v.quantile(0.4);
  double high_min = v.quantile(0.6), high_max = v.quantile(0.95);
  std::vector<OpParams> out;
  for (double low : kClampGrid) {
    if (low < low_min || low > low_max) continue;
    for (double high : kClampGrid) {
      if (high < high_min || high > high_max) continue;
      out.push_back({.low = low, .high = high});
    }
  }
  return out;
}

void apply_clamp(const OpParams& p, Chain* chain) {
  std::int64_t n = chain->elements();
  auto [out, step, number] = open_step(
      chain, "clamp", "clamp to [" + python_float(p.low) + ", " + python_float(p.high) + "]");
  step.expr = "torch.clamp(x, " + python_float(p.low) + ", " + python_float(p.high) + ")";
  elementwise_cost(&step, n);
  out.values = map_values(out.values, [&](double x) { return std::clamp(x, p.low, p.high); });
  update_piles(&out, /*folds=*/false);
  out.nonnegative = p.low >= 0;
  out.pending.clear();
  out.fixed_sum_axis = -1;
}

constexpr double kScales[] = {-2.0, -0.5, 0.5, 2.0, 3.0};

std::vector<OpParams> scale_variants(const Chain& c) {
  // Two multiplications in a row fold into one: the first would be wasted.
  if (last_op_is(c, {"mul_weight"})) return {};
  std::vector<OpParams> out;
  for (double s : kScales) {
    out.push_back({.high = s});
  }
  return out;
}

void apply_scale(const OpParams& p, Chain* chain) {
  std::int64_t n = chain->elements();
  int rank = rank_of(*chain);
  auto [out, step, number] = open_step(chain, "scale", "multiply by " + python_float(p.high));
  step.expr = "x * " + python_float(p.high);
  elementwise_cost(&step, n);
  out.values = map_values(out.values, [&](double x) { return x * p.high; });
  out.nonnegative = out.nonnegative && p.high > 0;
  if (p.high < 0) std::swap(out.top_pile, out.bottom_pile);
  out.pending.push_back({/*additive=*/false, all_axes(rank)});
}

/// The axes a learned per-feature parameter can follow: the last one, and NCHW's channels.
std::vector<OpParams> parameter_axes(const Chain& c) {
  std::vector<OpParams> out;
  int rank = rank_of(c);
  if (rank >= 2 && extent_at(c, rank - 1) >= kMinReducedExtent) out.push_back({.axis = rank - 1});
  if (rank == 4 && extent_at(c, 1) >= 2) out.push_back({.axis = 1});
  return out;
}

/// The power of two nearest to the values' spread: a bias neither drowned nor drowning.
double bias_scale(const Values& v) {
  double e = std::round(std::log2(std::max(1e-9, v.spread())));
  return std::exp2(std::clamp(e, -6.0, 4.0));
}

std::string axis_name(int axis, int rank) {
  return rank == 4 && axis == 1 ? "channel" : "feature (last dim)";
}

/// A learned parameter's step, opened: the parameter's name and the shape it broadcasts from.
struct ParameterStep {
  TensorState& out;
  Step& step;
  std::string name;
  std::string shape;
};

/// Opens the step of a learned parameter along p.axis, broadcast over the other axes: "add a
/// learned per-channel bias", named self.bias<step>. Its size is pinned and passed to __init__.
ParameterStep open_parameter_step(Chain* chain, const OpParams& p, const std::string& op,
                                  const std::string& verb, const std::string& noun) {
  std::int64_t n = chain->elements();
  int rank = rank_of(*chain);
  Dim dim = chain->tensor().dims[p.axis];
  std::string shape = broadcast_shape(*chain, p.axis);
  auto [out, step, number] =
      open_step(chain, op, verb + " a learned per-" + axis_name(p.axis, rank) + " " + noun);
  step.init_constants = {dim.constant};
  step.signature += "(axis=" + std::to_string(p.axis) + ")";
  elementwise_cost(&step, n);
  pin(chain, dim);
  return {out, step, "self." + noun + number, std::move(shape)};
}

std::vector<OpParams> bias_variants(const Chain& c) { return parameter_axes(c); }

void apply_bias(const OpParams& p, Chain* chain) {
  int rank = rank_of(*chain);
  double scale = bias_scale(chain->tensor().values);
  auto [out, step, name, shape] = open_parameter_step(chain, p, "add_bias", "add", "bias");
  std::string init = "torch.randn(" + shape + ")";
  if (scale != 1) init += " * " + python_float(scale);
  step.init_lines = {name + " = nn.Parameter(" + init + ")"};
  step.expr = "x + " + name;
  out.values = add_independent(out.values, Values::normal(0, scale, /*noise_share=*/0));
  out.nonnegative = false;
  out.pending.push_back({/*additive=*/true, all_but(rank, p.axis)});
}

std::vector<OpParams> mul_weight_variants(const Chain& c) {
  if (last_op_is(c, {"scale"})) return {};
  return parameter_axes(c);
}

void apply_mul_weight(const OpParams& p, Chain* chain) {
  int rank = rank_of(*chain);
  auto [out, step, name, shape] =
      open_parameter_step(chain, p, "mul_weight", "multiply by", "weight");
  // Positive scales around 1 (0.5 to 1.5): a weight, not a sign flip or a mask.
  step.init_lines = {name + " = nn.Parameter(torch.rand(" + shape + ") + 0.5)"};
  step.expr = "x * " + name;
  out.values = times_positive_weights(out.values);
  if (p.axis == out.fixed_sum_axis) out.fixed_sum_axis = -1;
  out.pending.push_back({/*additive=*/false, all_but(rank, p.axis)});
}

// --- structure: residual add and transpose ----------------------------------------------------

bool affine_only(const std::string& op) {
  return op == "scale" || op == "add_bias" || op == "mul_weight" || op == "transpose";
}

std::vector<OpParams> residual_variants(const Chain& c) {
  int residuals = static_cast<int>(std::count_if(
      c.steps.begin(), c.steps.end(), [](const Step& s) { return s.op == "residual_add"; }));
  if (residuals >= kMaxResiduals) return {};
  const TensorState& now = c.tensor();
  std::vector<OpParams> out;
  int current = static_cast<int>(c.history.size()) - 1;
  for (int source = 0; source < current; ++source) {
    const TensorState& then = c.history[source];
    if (then.dims != now.dims) continue;
    // f(x) + x with f affine folds into one affine step: it would add nothing.
    bool nonlinear_between = false;
    for (int k = source; k < current; ++k) nonlinear_between |= !affine_only(c.steps[k].op);
    if (!nonlinear_between) continue;
    // Each side must matter at the other's scale, judged by the bulk of the values rather than
    // by a few large ones.
    double a = then.values.interquartile() * then.values.noise_share;
    double b = now.values.interquartile() * now.values.noise_share;
    if (a < b / kResidualBalance || b < a / kResidualBalance) continue;
    out.push_back({.source = source});
  }
  return out;
}

void apply_residual(const OpParams& p, Chain* chain) {
  std::int64_t n = chain->elements();
  Values skip = chain->history[p.source].values;
  bool skip_nonnegative = chain->history[p.source].nonnegative;
  std::string what = p.source == 0 ? "the input" : "the output of step " + std::to_string(p.source);
  auto [out, step, number] = open_step(chain, "residual_add", "residual: add " + what);
  step.expr = "x + skip" + std::to_string(p.source);
  step.skip_source = p.source;
  step.signature += "(" + std::to_string(p.source) + ")";
  step.unit_bytes = 12.0 * static_cast<double>(n);
  out.values = add_independent(out.values, skip);
  out.top_pile = out.bottom_pile = 0;
  out.nonnegative = out.nonnegative && skip_nonnegative;
  out.fixed_sum_axis = -1;
  std::erase_if(out.pending, [](const AffineTerm& term) { return !term.additive; });
}

std::vector<OpParams> transpose_variants(const Chain& c) {
  int rank = rank_of(c);
  if (rank < 2) return {};
  if (extent_at(c, rank - 1) < 2 || extent_at(c, rank - 2) < 2) return {};
  return {OpParams{}};
}

void apply_transpose(Chain* chain) {
  int rank = rank_of(*chain);
  auto [out, step, number] = open_step(chain, "transpose", "transpose the last two dims");
  step.expr = "x.transpose(-2, -1)";
  step.kernels = 0;  // a view: the next step reads through it
  step.can_end = false;
  std::swap(out.dims[rank - 1], out.dims[rank - 2]);
  for (AffineTerm& term : out.pending) term.const_axes = swap_last_two(term.const_axes, rank);
  if (out.fixed_sum_axis >= rank - 2) out.fixed_sum_axis = 2 * rank - 3 - out.fixed_sum_axis;
}

// --- the table -----------------------------------------------------------------------------------

std::vector<OpSpec> build_library() {
  std::vector<OpSpec> ops;
  for (const Unary& u : kUnaries) {
    ops.push_back({u.name, 1, [&u](const Chain& c) { return unary_variants(u, c); },
                   [&u](const OpParams&, Chain* c) { apply_unary(u, c); }});
  }
  ops.push_back({"clamp", 1, clamp_variants, apply_clamp});
  ops.push_back({"scale", 2, scale_variants, apply_scale});
  ops.push_back({"add_bias", 2, bias_variants, apply_bias});
  ops.push_back({"mul_weight", 2, mul_weight_variants, apply_mul_weight});
  for (OpSpec& op : axis_ops()) ops.push_back(std::move(op));
  ops.push_back({"residual_add", 4, residual_variants, apply_residual});
  ops.push_back({"transpose", 2, transpose_variants, ignoring_params(apply_transpose)});
  return ops;
}

}  // namespace

const std::vector<OpSpec>& op_library() {
  static const std::vector<OpSpec> kLibrary = build_library();
  return kLibrary;
}

}  // namespace task_synth
}  // namespace cuda_agent
