#include "task/value_sketch.h"

#include <cstdint>
#include <numeric>
#include <utility>

namespace cuda_agent {
namespace task_synth {

namespace {

constexpr double kAtol = 1e-2;
constexpr double kRtol = 1e-2;

// Sampled combinations draw this many outcomes per sample they keep.
constexpr int kOversample = 4;
// Up to this many values a reduction is sampled; past it the limit laws take over.
constexpr int kSampledReduction = 32;

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

/// Values::kSamples * kOversample outcomes of draw(stream), kept as quantiles.
template <typename Draw>
std::vector<double> sampled_quantiles(Draw draw) {
  SampleStream stream;
  std::vector<double> outcomes;
  for (int i = 0; i < Values::kSamples * kOversample; ++i) outcomes.push_back(draw(stream));
  std::sort(outcomes.begin(), outcomes.end());
  std::vector<double> kept;
  for (int i = 0; i < Values::kSamples; ++i) kept.push_back(outcomes[i * kOversample + 1]);
  return kept;
}

/// The sketch of outcomes, each combine() over n values drawn from in, kept as quantiles.
template <typename Combine>
std::vector<double> sample_outcomes(const Values& in, int n, Combine combine) {
  std::vector<double> draw(static_cast<std::size_t>(n));
  return sampled_quantiles([&](SampleStream& stream) {
    for (double& x : draw) x = in.samples[stream.next()];
    return combine(draw);
  });
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

Values negated(const Values& in) {
  return map_values(in, [](double x) { return -x; });
}

Values add_independent(const Values& a, const Values& b) {
  Values out = with_noise(sampled_quantiles([&](SampleStream& stream) {
                            return a.samples[stream.next()] + b.samples[stream.next()];
                          }),
                          std::hypot(a.noise(), b.noise()));
  out.lower = a.lower + b.lower;
  out.upper = a.upper + b.upper;
  return out;
}

Values times_positive_weights(const Values& in) {
  Values out = with_noise(sampled_quantiles([&](SampleStream& stream) {
                            double w =
                                0.5 + (static_cast<double>(stream.next()) + 0.5) / Values::kSamples;
                            return in.samples[stream.next()] * w;
                          }),
                          in.noise() * std::sqrt(13.0 / 12));
  out.lower = std::min(0.5 * in.lower, 1.5 * in.lower);
  out.upper = std::max(0.5 * in.upper, 1.5 * in.upper);
  return out;
}

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

Values max_of(const Values& in, double n) {
  Values out = in;
  for (int i = 0; i < Values::kSamples; ++i) {
    out.samples[i] = in.quantile(std::pow((i + 0.5) / Values::kSamples, 1 / n));
  }
  return out;
}

Values logsumexp_of(const Values& in, double n) {
  double shift = in.samples.back();
  if (n <= kSampledReduction) {
    Values out = in;
    out.samples = sample_outcomes(in, static_cast<int>(n), [shift](const std::vector<double>& d) {
      double s = 0;
      for (double x : d) s += std::exp(x - shift);
      return shift + std::log(s);
    });
    return out;
  }
  // Many terms: the sum concentrates (delta method) unless a few large ones dominate it, when it
  // follows the maximum.
  double mean_exp = mean_exp_shifted(in, shift);
  Values squared = map_values(in, [shift](double x) { return std::exp(2 * (x - shift)); });
  double var_exp = std::max(0.0, squared.mean() - mean_exp * mean_exp);
  double delta = std::sqrt(var_exp / n) / mean_exp;
  double spread = std::min(delta, max_of(in, n).spread());
  return Values::normal(shift + std::log(n * mean_exp), spread, in.noise_share);
}

double mean_exp_shifted(const Values& in, double shift) {
  double sum = 0;
  for (double x : in.samples) sum += std::exp(x - shift);
  return sum / static_cast<double>(in.samples.size());
}

Values normalized(const Values& in, bool centered, double eps) {
  double center = centered ? in.mean() : 0;
  double square = centered ? in.spread() * in.spread() : in.rms() * in.rms();
  double scale = std::sqrt(square + eps);
  return map_values(in, [&](double x) { return (x - center) / scale; });
}

Values contracted(const Values& in, double weight_var_times_k, double bias_var) {
  double mean = in.mean(), noise = in.noise();
  double pattern = std::sqrt(std::max(0.0, in.spread() * in.spread() - noise * noise));
  double noise_out = noise * std::sqrt(weight_var_times_k);
  double pattern_out = std::sqrt((mean * mean + pattern * pattern) * weight_var_times_k + bias_var);
  double spread = std::hypot(noise_out, pattern_out);
  return Values::normal(0, spread, spread > 0 ? noise_out / spread : 0);
}

double pile_share(const Values& v, bool top) {
  double bound = top ? v.samples.back() : v.samples.front();
  double width = 1e-9 * (std::fabs(bound) + v.spread());
  auto on = std::count_if(v.samples.begin(), v.samples.end(),
                          [&](double x) { return std::fabs(x - bound) <= width; });
  return on >= 2 ? static_cast<double>(on) / static_cast<double>(v.samples.size()) : 0;
}

}  // namespace task_synth
}  // namespace cuda_agent
