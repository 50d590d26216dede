/// A sketch of the values a tensor holds, which task synthesis (task/synth.h) carries through
/// every operator of the library (task/op_library.h). It has a few uses:
///  - telling a useful output from one that a kernel computing nothing would match at the
///    evaluator's tolerance (an output near zero, near one constant, or mostly on a bound);
///  - telling an operator that changes its input from one that leaves it as it is, or that acts
///    as an affine map on the values it gets;
///  - choosing parameters that suit the values (a clamp's bounds, a bias's scale).
/// The statistics here see only values: what an operator does to sizes, axes and weights is the
/// library's business.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace cuda_agent {
namespace task_synth {

/// Values at evenly spaced quantiles of the elements' distribution, and the share of their
/// spread that changes with the input draw (the rest is fixed by position: biases, weights).
/// Elementwise operators map the samples exactly, so piles (relu's zeros, a clamp's bounds) and
/// saturation show; reductions use order statistics or the central limit theorem. Everything is
/// plain arithmetic on fixed sample positions, so a sketch is the same on every machine and needs
/// no seed.
struct Values {
  static constexpr int kSamples = 256;
  std::vector<double> samples;  // ascending
  double noise_share = 1;
  // Hard bounds of the values (a clamp's, sigmoid's), which no extrapolated tail passes.
  double lower = -HUGE_VAL;
  double upper = HUGE_VAL;

  /// A normal distribution's sketch.
  static Values normal(double mean, double sd, double noise_share = 1);
  double mean() const;
  double spread() const;  // standard deviation
  double rms() const;
  double noise() const { return spread() * noise_share; }
  double median() const { return samples[samples.size() / 2]; }
  /// The value at probability q, extrapolated past the outer samples along the normal scale up
  /// to the bounds.
  double quantile(double q) const;
  double interquartile() const { return quantile(0.75) - quantile(0.25); }
  /// The share of values within tolerance (atol = rtol = 1e-2) of center: what a constant output
  /// would match.
  double fraction_near(double center) const;
};

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

/// -x for every value.
Values negated(const Values& in);

/// a + b for independent a and b, as one sketch.
Values add_independent(const Values& a, const Values& b);

/// x * w with w uniform on [0.5, 1.5] per position: learned positive scales.
Values times_positive_weights(const Values& in);

/// A sum of n values. Only the part that changes with the draw adds up like noise; the fixed
/// pattern is taken as constant along the summed axis, where it grows n-fold (a GEMM's output
/// pattern summed over rows): the conservative case, since a pattern is what a kernel computing
/// nothing could reproduce.
Values sum_of(const Values& in, double n);

/// The maximum of n values: quantile u of it is quantile u^(1/n) of one value.
Values max_of(const Values& in, double n);

/// log(sum(exp)) of n values.
Values logsumexp_of(const Values& in, double n);

/// The mean of exp(x - shift) over the values; shifting by the largest keeps it in range.
double mean_exp_shifted(const Values& in, double shift);

/// Divides by the per-row spread (layer norm: after removing the row mean; RMS norm: the root
/// mean square), with the eps that keeps a nearly constant row near zero rather than blown up.
Values normalized(const Values& in, bool centered, double eps);

/// A contraction of many inputs with random weights is close to normal: its noise comes from
/// the input's noise, its pattern from the input's mean and pattern, and from a bias.
Values contracted(const Values& in, double weight_var_times_k, double bias_var);

/// The share of samples on the top (or bottom) sample's value, when at least two sit there.
double pile_share(const Values& v, bool top);

}  // namespace task_synth
}  // namespace cuda_agent
