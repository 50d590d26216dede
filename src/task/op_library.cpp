#include "task/op_library.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <utility>

namespace cuda_agent {
namespace synth {

namespace {

constexpr double kAtol = 1e-2;
constexpr double kRtol = 1e-2;

/// The standard normal quantile, by Acklam's rational approximation (relative error below
/// 1.2e-9): plain arithmetic, so the same everywhere.
double normal_quantile(double p) {
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                                 -2.759285104469687e+02, 1.383577518672690e+02,
                                 -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                                 -1.556989798598866e+02, 6.680131188771972e+01,
                                 -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                                 -2.400758277161838e+00, -2.549732539343734e+00,
                                 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
                                 2.445134137142996e+00, 3.754408661907416e+00};
  constexpr double kLow = 0.02425;
  p = std::clamp(p, 1e-300, 1 - 1e-16);
  if (p < kLow || p > 1 - kLow) {
    double q = std::sqrt(-2 * std::log(p < kLow ? p : 1 - p));
    double z = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
               ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
    return p < kLow ? z : -z;
  }
  double q = p - 0.5, r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

/// Where sample i of a sketch sits on the normal scale.
const std::vector<double>& sample_z() {
  static const std::vector<double> kZ = [] {
    std::vector<double> z(Values::kSamples);
    for (int i = 0; i < Values::kSamples; ++i) {
      z[i] = normal_quantile((i + 0.5) / Values::kSamples);
    }
    return z;
  }();
  return kZ;
}

}  // namespace

Values Values::normal(double mean, double sd, double noise_share) {
  Values v;
  v.noise_share = noise_share;
  for (double z : sample_z()) v.samples.push_back(mean + sd * z);
  return v;
}

double Values::mean() const {
  return std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
}

double Values::spread() const {
  double m = mean(), sum = 0;
  for (double x : samples) sum += (x - m) * (x - m);
  return std::sqrt(sum / static_cast<double>(samples.size()));
}

double Values::rms() const {
  double sum = 0;
  for (double x : samples) sum += x * x;
  return std::sqrt(sum / static_cast<double>(samples.size()));
}

double Values::quantile(double q) const {
  const int n = kSamples;
  // Inside the samples, interpolate between neighbours (sample i sits at (i + 0.5) / n).
  double position = q * n - 0.5;
  if (position >= 0 && position <= n - 1) {
    auto i = static_cast<int>(position);
    if (i == n - 1) return samples[i];
    double t = position - i;
    return samples[i] + t * (samples[i + 1] - samples[i]);
  }
  // Past them, continue the outermost pair's slope on the normal scale: flat when they sit on a
  // bound (a clamp's, relu's), steep when the tail is long.
  const std::vector<double>& z = sample_z();
  double at = normal_quantile(q);
  if (position < 0) {
    double slope = (samples[1] - samples[0]) / (z[1] - z[0]);
    return std::max(lower, samples[0] + slope * (at - z[0]));
  }
  double slope = (samples[n - 1] - samples[n - 2]) / (z[n - 1] - z[n - 2]);
  return std::min(upper, samples[n - 1] + slope * (at - z[n - 1]));
}

double Values::fraction_near(double center) const {
  std::size_t near = 0;
  for (double x : samples) near += std::fabs(center - x) <= kAtol + kRtol * std::fabs(x);
  return static_cast<double>(near) / static_cast<double>(samples.size());
}

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

namespace {

// Normalizing or contracting fewer values than this is not worth a task.
constexpr std::int64_t kMinNormalizedExtent = 16;
constexpr std::int64_t kMinReducedExtent = 4;
// A reduction that leaves fewer values than this per batch unit ends the chain.
constexpr std::int64_t kClosingElements = 64;
// GEMM output widths, and the widest inner dimension a GEMM takes.
constexpr std::int64_t kGemmWidths[] = {1024, 2048, 4096};
constexpr std::int64_t kMaxGemmInner = 8192;
constexpr std::int64_t kMaxConvChannels = 256;
constexpr int kMaxResiduals = 2;
constexpr double kResidualBalance = 4;

// --- the current tensor ---------------------------------------------------------------------

int rank_of(const Chain& c) { return static_cast<int>(c.tensor().dims.size()); }
int last_axis(const Chain& c) { return rank_of(c) - 1; }
std::int64_t extent_at(const Chain& c, int axis) { return c.extent(c.tensor().dims[axis]); }
std::string expr_at(const Chain& c, int axis) { return c.size_expr(c.tensor().dims[axis]); }

bool last_op_is(const Chain& c, std::initializer_list<const char*> names) {
  if (c.steps.empty()) return false;
  for (const char* name : names) {
    if (c.steps.back().op == name) return true;
  }
  return false;
}

/// Python's spelling of a dim argument: -1 for the last axis, which reads better than its index.
std::string dim_arg(int axis, int rank) { return axis == rank - 1 ? "-1" : std::to_string(axis); }

/// A float literal as Python writes it; the values come from small grids of binary fractions.
std::string literal(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

/// The parameter shape that broadcasts along axis: (d,) for the last axis, (c, 1, 1) for the
/// channels of NCHW.
std::string broadcast_shape(const Chain& c, int axis) {
  std::string shape = expr_at(c, axis);
  for (int i = axis + 1; i < rank_of(c); ++i) shape += ", 1";
  return shape;
}

// --- axis masks of pending affine terms --------------------------------------------------------

unsigned all_axes(int rank) { return (1u << rank) - 1; }
unsigned all_but(int rank, int axis) { return all_axes(rank) & ~(1u << axis); }

unsigned without_axis(unsigned mask, int axis) {
  unsigned low = mask & ((1u << axis) - 1);
  return low | ((mask >> (axis + 1)) << axis);
}

unsigned swap_last_two(unsigned mask, int rank) {
  unsigned a = (mask >> (rank - 1)) & 1u, b = (mask >> (rank - 2)) & 1u;
  mask &= ~((1u << (rank - 1)) | (1u << (rank - 2)));
  return mask | (a << (rank - 2)) | (b << (rank - 1));
}

/// Whether normalizing over `axes` would cancel a pending term of a kind it removes.
bool cancels_pending(const TensorState& t, unsigned axes, bool additive, bool multiplicative) {
  return std::any_of(t.pending.begin(), t.pending.end(), [&](const AffineTerm& term) {
    return (term.additive ? additive : multiplicative) && (term.const_axes & axes) == axes;
  });
}

// --- value sketches ------------------------------------------------------------------------------

/// f of every value. The new bounds are the images of the old ones or of the samples, which
/// holds for functions monotone in their tails, as all of the library's are; a bound whose image
/// is undefined (gelu's at minus infinity) is dropped.
template <typename F>
Values map_values(const Values& in, F f) {
  Values out = in;
  for (double& x : out.samples) x = f(x);
  std::sort(out.samples.begin(), out.samples.end());
  double a = f(in.lower), b = f(in.upper);
  out.lower = std::isnan(a) || std::isnan(b) ? -HUGE_VAL : std::min({a, b, out.samples.front()});
  out.upper = std::isnan(a) || std::isnan(b) ? HUGE_VAL : std::max({a, b, out.samples.back()});
  return out;
}

/// A fixed stream of sample indices: the sketches' Monte Carlo needs no seed of its own.
class SampleStream {
 public:
  std::size_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return static_cast<std::size_t>((z ^ (z >> 31)) % Values::kSamples);
  }

 private:
  std::uint64_t state_ = 0;
};

/// The sketch of outcomes, each combine() over n values drawn from in, kept as quantiles.
template <typename Combine>
std::vector<double> sample_outcomes(const Values& in, int n, Combine combine) {
  constexpr int kOversample = 4;
  SampleStream stream;
  std::vector<double> outcomes, draw(static_cast<std::size_t>(n));
  for (int i = 0; i < Values::kSamples * kOversample; ++i) {
    for (double& x : draw) x = in.samples[stream.next()];
    outcomes.push_back(combine(draw));
  }
  std::sort(outcomes.begin(), outcomes.end());
  std::vector<double> kept;
  for (int i = 0; i < Values::kSamples; ++i) kept.push_back(outcomes[i * kOversample + 1]);
  return kept;
}

/// Values with the given samples; the noise share follows from how much of the spread
/// noise_sd accounts for.
Values with_noise(std::vector<double> samples, double noise_sd) {
  Values v;
  v.samples = std::move(samples);
  double spread = v.spread();
  v.noise_share = spread > 0 ? std::min(1.0, noise_sd / spread) : 0;
  return v;
}

/// a + b for independent a and b, as one sketch.
Values add_independent(const Values& a, const Values& b) {
  SampleStream stream;
  std::vector<double> sums;
  for (int i = 0; i < Values::kSamples * 4; ++i) {
    sums.push_back(a.samples[stream.next()] + b.samples[stream.next()]);
  }
  std::sort(sums.begin(), sums.end());
  std::vector<double> kept;
  for (int i = 0; i < Values::kSamples; ++i) kept.push_back(sums[i * 4 + 1]);
  Values out = with_noise(std::move(kept), std::hypot(a.noise(), b.noise()));
  out.lower = a.lower + b.lower;
  out.upper = a.upper + b.upper;
  return out;
}

// Up to this many values a reduction is sampled; past it the limit laws take over.
constexpr int kSampledReduction = 32;

/// A sum of n values. Only the part that changes with the draw adds up like noise; the fixed
/// pattern is taken as constant along the summed axis, where it grows n-fold (a GEMM's output
/// pattern summed over rows): the conservative case, since a pattern is what a kernel computing
/// nothing could reproduce.
Values sum_of(const Values& in, double n) {
  double mean = in.mean(), share = in.noise_share;
  double pattern = in.spread() * std::sqrt(std::max(0.0, 1 - share * share));
  Values noise = map_values(in, [&](double x) { return mean + (x - mean) * share; });
  noise.noise_share = 1;
  Values sum;
  if (n <= kSampledReduction) {
    sum.samples = sample_outcomes(noise, static_cast<int>(n), [](const std::vector<double>& d) {
      return std::accumulate(d.begin(), d.end(), 0.0);
    });
  } else {
    sum = Values::normal(mean * n, noise.spread() * std::sqrt(n));
  }
  sum.lower = noise.lower * n;
  sum.upper = noise.upper * n;
  if (pattern <= 0) return sum;
  return add_independent(sum, Values::normal(0, pattern * n, /*noise_share=*/0));
}

/// The maximum of n values: quantile u of it is quantile u^(1/n) of one value.
Values max_of(const Values& in, double n) {
  Values out = in;
  for (int i = 0; i < Values::kSamples; ++i) {
    out.samples[i] = in.quantile(std::pow((i + 0.5) / Values::kSamples, 1 / n));
  }
  return out;
}

Values negated(const Values& in) {
  return map_values(in, [](double x) { return -x; });
}

/// x * w with w uniform on [0.5, 1.5] per position: learned positive scales.
Values times_positive_weights(const Values& in) {
  SampleStream stream;
  std::vector<double> products;
  for (int i = 0; i < Values::kSamples * 4; ++i) {
    double w = 0.5 + (static_cast<double>(stream.next()) + 0.5) / Values::kSamples;
    products.push_back(in.samples[stream.next()] * w);
  }
  std::sort(products.begin(), products.end());
  std::vector<double> kept;
  for (int i = 0; i < Values::kSamples; ++i) kept.push_back(products[i * 4 + 1]);
  Values out = with_noise(std::move(kept), in.noise() * std::sqrt(13.0 / 12));
  out.lower = std::min(0.5 * in.lower, 1.5 * in.lower);
  out.upper = std::max(0.5 * in.upper, 1.5 * in.upper);
  return out;
}

/// mean over the positive part of log-sum-exp's terms, shifted by the largest sample for range.
double mean_exp_shifted(const Values& in, double shift) {
  double sum = 0;
  for (double x : in.samples) sum += std::exp(x - shift);
  return sum / static_cast<double>(in.samples.size());
}

/// The share of samples on the top (or bottom) sample's value, when at least two sit there.
double pile_share(const Values& v, bool top) {
  double bound = top ? v.samples.back() : v.samples.front();
  double width = 1e-9 * (std::fabs(bound) + v.spread());
  auto on = std::count_if(v.samples.begin(), v.samples.end(),
                          [&](double x) { return std::fabs(x - bound) <= width; });
  return on >= 2 ? static_cast<double>(on) / static_cast<double>(v.samples.size()) : 0;
}

/// Piles after an elementwise map: those the samples show now, and those an earlier bias or
/// weight smeared in the samples but that the map carried along.
void update_piles(TensorState* t, bool folds) {
  double carried_top = folds ? std::max(t->top_pile, t->bottom_pile) : t->top_pile;
  double carried_bottom = folds ? 0 : t->bottom_pile;
  t->top_pile = std::max(carried_top, pile_share(t->values, true));
  t->bottom_pile = std::max(carried_bottom, pile_share(t->values, false));
}

/// Whether a max over n values would mostly return a pile's bound: most groups of n hold one.
bool max_hits_pile(double pile, double n) { return pile * n >= 3; }

// --- steps ---------------------------------------------------------------------------------------

/// Step number chain->steps.size() + 1, opened: the tensor it produces (a copy of the current one
/// to change) and the step to fill in.
struct Opened {
  TensorState& out;
  Step& step;
  std::string number;
};

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

void pin(Chain* chain, const Dim& dim) {
  if (dim.constant >= 0) chain->constants[dim.constant].pinned = true;
}

/// A pass that reads and writes every element once, like an eager elementwise kernel.
void elementwise_cost(Step* step, std::int64_t elements, int kernels = 1) {
  step->unit_bytes = 8.0 * static_cast<double>(elements) * kernels;
  step->kernels = kernels;
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

/// Whether f is affine to within 1% of the variance over the values it gets: then it keeps
/// what an affine step keeps (fixed row sums, separable biases), whatever its formula.
template <typename F>
bool acts_affinely(const Values& in, F f) {
  double mx = in.mean(), my = 0;
  for (double x : in.samples) my += f(x);
  my /= static_cast<double>(in.samples.size());
  double sxx = 0, sxy = 0, syy = 0;
  for (double x : in.samples) {
    double dx = x - mx, dy = f(x) - my;
    sxx += dx * dx;
    sxy += dx * dy;
    syy += dy * dy;
  }
  return syy <= 0 || sxx <= 0 || sxy * sxy >= 0.99 * sxx * syy;
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
      OpParams p;
      p.low = low;
      p.high = high;
      out.push_back(p);
    }
  }
  return out;
}

void apply_clamp(const OpParams& p, Chain* chain) {
  std::int64_t n = chain->elements();
  auto [out, step, number] =
      open_step(chain, "clamp", "clamp to [" + literal(p.low) + ", " + literal(p.high) + "]");
  step.expr = "torch.clamp(x, " + literal(p.low) + ", " + literal(p.high) + ")";
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
    OpParams p;
    p.high = s;
    out.push_back(p);
  }
  return out;
}

void apply_scale(const OpParams& p, Chain* chain) {
  std::int64_t n = chain->elements();
  int rank = rank_of(*chain);
  auto [out, step, number] = open_step(chain, "scale", "multiply by " + literal(p.high));
  step.expr = "x * " + literal(p.high);
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
  if (rank >= 2 && extent_at(c, rank - 1) >= kMinReducedExtent) {
    OpParams p;
    p.axis = rank - 1;
    out.push_back(p);
  }
  if (rank == 4 && extent_at(c, 1) >= 2) {
    OpParams p;
    p.axis = 1;
    out.push_back(p);
  }
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

std::vector<OpParams> bias_variants(const Chain& c) { return parameter_axes(c); }

void apply_bias(const OpParams& p, Chain* chain) {
  std::int64_t n = chain->elements();
  int rank = rank_of(*chain);
  Dim dim = chain->tensor().dims[p.axis];
  std::string shape = broadcast_shape(*chain, p.axis);
  double scale = bias_scale(chain->tensor().values);
  auto [out, step, number] =
      open_step(chain, "add_bias", "add a learned per-" + axis_name(p.axis, rank) + " bias");
  std::string name = "self.bias" + number;
  std::string init = "torch.randn(" + shape + ")";
  if (scale != 1) init += " * " + literal(scale);
  step.init_lines = {name + " = nn.Parameter(" + init + ")"};
  step.init_constants = {dim.constant};
  step.expr = "x + " + name;
  step.signature += "(axis=" + std::to_string(p.axis) + ")";
  elementwise_cost(&step, n);
  pin(chain, dim);
  Values bias = Values::normal(0, scale, /*noise_share=*/0);
  out.values = add_independent(out.values, bias);
  out.nonnegative = false;
  out.pending.push_back({/*additive=*/true, all_but(rank, p.axis)});
}

std::vector<OpParams> mul_weight_variants(const Chain& c) {
  if (last_op_is(c, {"scale"})) return {};
  return parameter_axes(c);
}

void apply_mul_weight(const OpParams& p, Chain* chain) {
  std::int64_t n = chain->elements();
  int rank = rank_of(*chain);
  Dim dim = chain->tensor().dims[p.axis];
  std::string shape = broadcast_shape(*chain, p.axis);
  auto [out, step, number] = open_step(
      chain, "mul_weight", "multiply by a learned per-" + axis_name(p.axis, rank) + " weight");
  std::string name = "self.weight" + number;
  // Positive scales around 1 (0.5 to 1.5): a weight, not a sign flip or a mask.
  step.init_lines = {name + " = nn.Parameter(torch.rand(" + shape + ") + 0.5)"};
  step.init_constants = {dim.constant};
  step.expr = "x * " + name;
  step.signature += "(axis=" + std::to_string(p.axis) + ")";
  elementwise_cost(&step, n);
  pin(chain, dim);
  out.values = times_positive_weights(out.values);
  if (p.axis == out.fixed_sum_axis) out.fixed_sum_axis = -1;
  out.pending.push_back({/*additive=*/false, all_but(rank, p.axis)});
}

// --- reductions
// ------------------------------------------------------------------------------------

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
    for (bool keepdim : {false, true}) {
      OpParams p;
      p.axis = axis;
      p.keepdim = keepdim;
      out.push_back(p);
    }
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
    case ReduceKind::kLogSumExp: {
      double shift = in.samples.back();
      if (n <= kSampledReduction) {
        Values out = in;
        out.samples =
            sample_outcomes(in, static_cast<int>(n), [shift](const std::vector<double>& d) {
              double s = 0;
              for (double x : d) s += std::exp(x - shift);
              return shift + std::log(s);
            });
        return out;
      }
      // Many terms: the sum concentrates (delta method) unless a few large ones dominate it,
      // when it follows the maximum.
      double mean_exp = mean_exp_shifted(in, shift);
      Values squared = map_values(in, [shift](double x) { return std::exp(2 * (x - shift)); });
      double var_exp = std::max(0.0, squared.mean() - mean_exp * mean_exp);
      double delta = std::sqrt(var_exp / n) / mean_exp;
      double spread = std::min(delta, max_of(in, n).spread());
      return Values::normal(shift + std::log(n * mean_exp), spread, in.noise_share);
    }
    case ReduceKind::kNorm: {
      Values squares = map_values(in, square);
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

/// Divides by the per-row spread (layer norm: after removing the row mean; RMS norm: the root
/// mean square), with the eps that keeps a nearly constant row near zero rather than blown up.
Values normalized(const Values& in, bool centered, double eps) {
  double center = centered ? in.mean() : 0;
  double square = centered ? in.spread() * in.spread() : in.rms() * in.rms();
  double scale = std::sqrt(square + eps);
  return map_values(in, [&](double x) { return (x - center) / scale; });
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

std::vector<OpParams> layer_norm_variants(const Chain& c) {
  int last = last_axis(c);
  if (last < 1 || extent_at(c, last) < kMinNormalizedExtent || follows_a_normalization(c)) {
    return {};
  }
  if (cancels_pending(c.tensor(), 1u << last, true, true)) return {};
  if (already_normalized(c.tensor().values, /*centered=*/true)) return {};
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

std::vector<OpParams> rms_norm_variants(const Chain& c) {
  int last = last_axis(c);
  if (last < 1 || extent_at(c, last) < kMinNormalizedExtent || follows_a_normalization(c)) {
    return {};
  }
  if (cancels_pending(c.tensor(), 1u << last, false, true)) return {};
  if (already_normalized(c.tensor().values, /*centered=*/false)) return {};
  return {OpParams{}};
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
    OpParams p;
    p.size = groups;
    out.push_back(p);
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
  for (std::int64_t width : kGemmWidths) {
    OpParams p;
    p.size = width;
    out.push_back(p);
  }
  return out;
}

/// The dimension a GEMM or convolution produces: the input's own when the width is the same
/// (a square weight reads better), else a new constant.
Dim output_dim(Chain* chain, const Dim& in, std::int64_t width, const std::string& base) {
  if (chain->extent(in) == width) return in;
  return Dim{chain->add_constant(base, width), 1};
}

void gemm_cost(Step* step, double rows, double k, double n) {
  step->unit_gemm_flops = 2 * rows * k * n;
  step->unit_bytes = 4 * rows * (k + n);
  step->fixed_bytes = 4 * k * n;
}

/// A contraction of many inputs with random weights is close to normal: its noise comes from
/// the input's noise, its pattern from the input's mean and pattern, and from a bias.
Values contracted(const Values& in, double weight_var_times_k, double bias_var) {
  double mean = in.mean(), noise = in.noise();
  double pattern = std::sqrt(std::max(0.0, in.spread() * in.spread() - noise * noise));
  double noise_out = noise * std::sqrt(weight_var_times_k);
  double pattern_out = std::sqrt((mean * mean + pattern * pattern) * weight_var_times_k + bias_var);
  double spread = std::hypot(noise_out, pattern_out);
  return Values::normal(0, spread, spread > 0 ? noise_out / spread : 0);
}

void apply_linear(const OpParams& p, Chain* chain) {
  int last = last_axis(*chain);
  Dim in = chain->tensor().dims[last];
  double k = static_cast<double>(chain->extent(in));
  double rows = static_cast<double>(chain->elements()) / k;
  pin(chain, in);
  Dim out_dim = output_dim(chain, in, p.size, "hidden");
  std::string in_size = chain->size_expr(in), out_size = chain->size_expr(out_dim);
  auto [out, step, number] =
      open_step(chain, "linear", "linear layer (nn.Linear): " + in_size + " -> " + out_size);
  step.init_lines = {"self.linear" + number + " = nn.Linear(" + in_size + ", " + out_size + ")"};
  step.init_constants = {in.constant, out_dim.constant};
  step.expr = "self.linear" + number + "(x)";
  step.signature += "(" + std::to_string(p.size) + ")";
  gemm_cost(&step, rows, k, static_cast<double>(p.size));
  // nn.Linear's default init draws U(-1/sqrt(k), 1/sqrt(k)): variance 1 / (3k) a weight.
  out.values = contracted(out.values, 1.0 / 3, 1 / (3 * k));
  out.top_pile = out.bottom_pile = 0;
  out.dims[last] = out_dim;
  out.nonnegative = false;
  out.fixed_sum_axis = -1;
  out.pending = {{true, all_but(last + 1, last)}};  // its bias
}

void apply_matmul(const OpParams& p, Chain* chain) {
  int last = last_axis(*chain);
  Dim in = chain->tensor().dims[last];
  double k = static_cast<double>(chain->extent(in));
  double rows = static_cast<double>(chain->elements()) / k;
  pin(chain, in);
  Dim out_dim = output_dim(chain, in, p.size, "hidden");
  std::string in_size = chain->size_expr(in), out_size = chain->size_expr(out_dim);
  auto [out, step, number] =
      open_step(chain, "matmul", "matmul with a learned weight: " + in_size + " -> " + out_size);
  std::string scale_base = in.divisor == 1 ? in_size : "(" + in_size + ")";
  step.init_lines = {"self.weight" + number + " = nn.Parameter(torch.randn(" + in_size + ", " +
                     out_size + ") * " + scale_base + " ** -0.5)"};
  step.init_constants = {in.constant, out_dim.constant};
  step.expr = "x @ self.weight" + number;
  step.signature += "(" + std::to_string(p.size) + ")";
  gemm_cost(&step, rows, k, static_cast<double>(p.size));
  out.values = contracted(out.values, 1.0, 0);
  out.top_pile = out.bottom_pile = 0;
  out.dims[last] = out_dim;
  out.nonnegative = false;
  out.fixed_sum_axis = -1;
  // A factor constant along the contracted axis passes through; anything else mixes.
  std::vector<AffineTerm> kept;
  for (const AffineTerm& term : out.pending) {
    if (!term.additive && (term.const_axes >> last & 1u)) kept.push_back(term);
  }
  out.pending = std::move(kept);
}

std::vector<OpParams> conv_variants(const Chain& c) {
  if (rank_of(c) != 4) return {};
  std::int64_t channels = extent_at(c, 1);
  if (channels < 3 || channels > kMaxConvChannels) return {};
  if (extent_at(c, 2) < 4 || extent_at(c, 3) < 4) return {};
  std::vector<OpParams> out;
  for (std::int64_t width : {channels, channels * 2, channels / 2}) {
    if (width < 8 || width > kMaxConvChannels) continue;
    OpParams p;
    p.size = width;
    out.push_back(p);
  }
  return out;
}

void apply_conv(const OpParams& p, Chain* chain) {
  std::int64_t n_in = chain->elements();
  Dim in = chain->tensor().dims[1];
  double c_in = static_cast<double>(chain->extent(in));
  double pixels = static_cast<double>(n_in) / c_in;
  pin(chain, in);
  Dim out_dim = output_dim(chain, in, p.size, "out_channels");
  std::string in_size = chain->size_expr(in), out_size = chain->size_expr(out_dim);
  auto [out, step, number] = open_step(
      chain, "conv2d", "3x3 convolution, padding 1: " + in_size + " -> " + out_size + " channels");
  step.init_lines = {"self.conv" + number + " = nn.Conv2d(" + in_size + ", " + out_size +
                     ", 3, padding=1)"};
  step.init_constants = {in.constant, out_dim.constant};
  step.expr = "self.conv" + number + "(x)";
  step.signature += "(" + std::to_string(p.size) + ")";
  double c_out = static_cast<double>(p.size);
  step.unit_conv_flops = 2 * 9 * c_in * c_out * pixels;
  step.unit_bytes = 4 * pixels * (c_in + c_out);
  step.fixed_bytes = 4 * 9 * c_in * c_out;
  // Default init is U(-b, b) with b = 1 / sqrt(9 c_in), like nn.Linear's.
  out.values = contracted(out.values, 1.0 / 3, 1 / (27 * c_in));
  out.top_pile = out.bottom_pile = 0;
  out.dims[1] = out_dim;
  out.nonnegative = false;
  out.fixed_sum_axis = -1;
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
    OpParams p;
    p.source = source;
    out.push_back(p);
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
  std::vector<AffineTerm> kept;
  for (const AffineTerm& term : out.pending) {
    if (term.additive) kept.push_back(term);
  }
  out.pending = std::move(kept);
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

OpSpec::Apply ignoring_params(void (*apply)(Chain*)) {
  return [apply](const OpParams&, Chain* c) { apply(c); };
}

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
  for (const Reduction& r : kReductions) {
    ops.push_back({r.name, 2, [&r](const Chain& c) { return reduce_variants(r, c); },
                   [&r](const OpParams& p, Chain* c) { apply_reduce(r, p, c); }});
  }
  ops.push_back(
      {"softmax", 2, softmax_variants, ignoring_params([](Chain* c) { apply_softmax(false, c); })});
  ops.push_back({"log_softmax", 1, softmax_variants,
                 ignoring_params([](Chain* c) { apply_softmax(true, c); })});
  ops.push_back({"layer_norm", 3, layer_norm_variants, ignoring_params(apply_layer_norm)});
  ops.push_back({"rms_norm", 3, rms_norm_variants, ignoring_params(apply_rms_norm)});
  ops.push_back({"group_norm", 3, group_norm_variants, apply_group_norm});
  ops.push_back({"batch_norm", 2, batch_norm_variants, ignoring_params(apply_batch_norm)});
  ops.push_back({"linear", 4, gemm_variants, apply_linear});
  ops.push_back({"matmul", 3, gemm_variants, apply_matmul});
  ops.push_back({"conv2d", 4, conv_variants, apply_conv});
  ops.push_back({"max_pool2d", 2, [](const Chain& c) { return pool_variants(true, c); },
                 ignoring_params([](Chain* c) { apply_pool(true, c); })});
  ops.push_back({"avg_pool2d", 2, [](const Chain& c) { return pool_variants(false, c); },
                 ignoring_params([](Chain* c) { apply_pool(false, c); })});
  ops.push_back({"residual_add", 4, residual_variants, apply_residual});
  ops.push_back({"transpose", 2, transpose_variants, ignoring_params(apply_transpose)});
  return ops;
}

}  // namespace

const std::vector<OpSpec>& op_library() {
  static const std::vector<OpSpec> kLibrary = build_library();
  return kLibrary;
}

}  // namespace synth
}  // namespace cuda_agent
