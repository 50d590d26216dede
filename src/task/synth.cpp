#include "task/synth.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <utility>

#include "task/op_library.h"
#include "util/text.h"

namespace cuda_agent {
namespace {

using task_synth::Chain;
using task_synth::OpParams;
using task_synth::OpSpec;
using task_synth::python_float;
using task_synth::SizeConstant;
using task_synth::Step;
using task_synth::TensorState;
using task_synth::Values;

/// splitmix64 with unbiased bounded draws: the same numbers on every platform, where the standard
/// library's distributions differ, so a seed names the same tasks everywhere.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}

  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  /// Uniform in [0, n) for n > 0, by rejection rather than a biased modulo.
  std::uint64_t below(std::uint64_t n) {
    const std::uint64_t threshold = (0 - n) % n;  // 2^64 mod n
    for (;;) {
      std::uint64_t r = next();
      if (r >= threshold) return r % n;
    }
  }

  template <typename T, std::size_t N>
  T pick(const T (&values)[N]) {
    return values[below(N)];
  }

 private:
  std::uint64_t state_;
};

// --- inputs --------------------------------------------------------------------------------------

constexpr std::int64_t kFeatures2d[] = {256, 512, 1024, 2048, 4096, 8192};
constexpr std::int64_t kSeqLens[] = {64, 128, 256, 512, 1024, 2048};
constexpr std::int64_t kFeatures3d[] = {64, 128, 256, 512, 1024, 2048, 4096};
constexpr std::int64_t kChannels[] = {3, 8, 16, 32, 64, 128, 256};
constexpr std::int64_t kSpatial[] = {16, 32, 64, 128, 256};
// Elements of one batch unit of the input: bounds what a shrunk run still costs.
constexpr std::int64_t kMinUnitElements = 1 << 12;
constexpr std::int64_t kMaxUnitElements = 1 << 21;
// No intermediate grows past this per batch unit (a GEMM widens its rows).
constexpr std::int64_t kMaxUnitIntermediate = 1 << 24;

struct InputDistribution {
  double offset;
  double scale;
};
// Mostly plain randn; offsets and wider scales keep some reductions and saturating activations
// away from constant outputs.
constexpr InputDistribution kInputDistributions[] = {{0, 1}, {0, 1}, {0, 1}, {0.5, 1},
                                                     {1, 1}, {0, 2}, {0, 4}};

int add_input_constant(Chain* chain, const char* name, std::int64_t value, bool batch_like) {
  chain->constants.push_back({name, value, batch_like, /*pinned=*/false});
  return static_cast<int>(chain->constants.size()) - 1;
}

/// The input's sizes: sensible sets per rank, within the per-unit bounds. The batch constant is
/// 1 until choose_batch() sizes the task.
Chain draw_input(Rng& rng) {
  Chain chain;
  TensorState input;
  input.dims.push_back({add_input_constant(&chain, "batch", 1, true), 1});
  std::uint64_t rank = 2 + rng.below(3);
  std::vector<std::pair<const char*, std::int64_t>> sizes;
  bool seq_scales = false;
  for (;;) {
    sizes.clear();
    if (rank == 2) {
      sizes = {{"features", rng.pick(kFeatures2d)}};
    } else if (rank == 3) {
      sizes = {{"seq_len", rng.pick(kSeqLens)}, {"features", rng.pick(kFeatures3d)}};
      seq_scales = true;
    } else {
      sizes = {{"channels", rng.pick(kChannels)},
               {"height", rng.pick(kSpatial)},
               {"width", rng.pick(kSpatial)}};
    }
    std::int64_t unit = 1;
    for (const auto& [name, value] : sizes) unit *= value;
    if (unit >= kMinUnitElements && unit <= kMaxUnitElements) break;
  }
  for (const auto& [name, value] : sizes) {
    bool batch_like = seq_scales && std::string(name) == "seq_len";
    input.dims.push_back({add_input_constant(&chain, name, value, batch_like), 1});
  }
  InputDistribution d = rng.pick(kInputDistributions);
  chain.input_offset = d.offset;
  chain.input_scale = d.scale;
  input.values = Values::normal(d.offset, d.scale);
  chain.history.push_back(std::move(input));
  return chain;
}

// --- drawing a composition ---------------------------------------------------------------------

/// The share of values on one pile at the median (relu's zeros, a clamp's bound), whatever the
/// scale.
double pile_at_median(const Values& v) {
  double m = v.median(), width = 1e-3 * v.spread();
  return static_cast<double>(std::count_if(v.samples.begin(), v.samples.end(),
                                           [&](double x) { return std::fabs(x - m) <= width; })) /
         static_cast<double>(v.samples.size());
}

/// Whether the values are worth comparing at atol = rtol = 1e-2: what changes with the input
/// draw must stand well clear of the tolerance, and most values must be neither within it of
/// zero nor of one constant, or a kernel computing nothing would pass.
bool output_is_useful(const Values& v) {
  return v.noise() >= 0.05 + 0.05 * v.rms() && v.fraction_near(v.median()) <= 0.5 &&
         v.fraction_near(0) <= 0.5;
}

/// The checks every step must pass beyond its own operator's requirements.
bool is_sound(const Chain& chain, int min_ops, bool planned_last) {
  // SCALABLE_SIZES must keep a constant to shrink.
  bool scalable = std::any_of(chain.constants.begin(), chain.constants.end(),
                              [](const SizeConstant& c) { return c.batch_like && !c.pinned; });
  if (!scalable || chain.elements() > kMaxUnitIntermediate) return false;
  const TensorState& t = chain.tensor();
  const Values& v = t.values;
  double rms = v.rms();
  // Values in fp32's comfortable range, the input's part still visible in them, and not mostly
  // one value: what later steps could not bring back.
  if (!std::isfinite(rms) || rms > 1e6 || v.noise() < 1e-2 * rms || v.noise() < 1e-6) {
    return false;
  }
  if (pile_at_median(v) > 0.9) return false;
  // Nor spikes over a flat floor (a softmax of wide logits): the bulk must carry the spread.
  if (v.interquartile() < 0.05 * v.spread()) return false;
  if (t.closed && static_cast<int>(chain.steps.size()) < min_ops) return false;
  if (planned_last || t.closed) return chain.steps.back().can_end && output_is_useful(v);
  return true;
}

struct Candidate {
  const OpSpec* op;
  std::vector<OpParams> variants;
};

/// Appends one operator drawn by weight among those whose requirements hold, with one of its
/// variants; a draw that fails the chain's checks is struck off and another drawn. False when
/// none fits.
bool append_op(Rng& rng, int min_ops, bool planned_last, Chain* chain) {
  std::string previous = chain->steps.empty() ? "" : chain->steps.back().op;
  std::vector<Candidate> candidates;
  for (const OpSpec& op : task_synth::op_library()) {
    // The same operator twice in a row is redundant (relu), folds (scale) or undoes itself.
    if (op.name == previous) continue;
    std::vector<OpParams> variants = op.variants(*chain);
    if (!variants.empty()) candidates.push_back({&op, std::move(variants)});
  }
  while (!candidates.empty()) {
    std::uint64_t total = 0;
    for (const Candidate& c : candidates) total += static_cast<std::uint64_t>(c.op->weight);
    std::uint64_t r = rng.below(total);
    std::size_t i = 0;
    while (r >= static_cast<std::uint64_t>(candidates[i].op->weight)) {
      r -= static_cast<std::uint64_t>(candidates[i].op->weight);
      ++i;
    }
    Candidate& candidate = candidates[i];
    std::size_t v = rng.below(candidate.variants.size());
    Chain trial = *chain;
    candidate.op->apply(candidate.variants[v], &trial);
    if (is_sound(trial, min_ops, planned_last)) {
      *chain = std::move(trial);
      return true;
    }
    candidate.variants.erase(candidate.variants.begin() + static_cast<std::ptrdiff_t>(v));
    if (candidate.variants.empty()) {
      candidates.erase(candidates.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  return false;
}

/// A composition of min_ops to max_ops operators, or false when this draw got stuck.
bool draw_chain(Rng& rng, const SynthOptions& options, Chain* chain) {
  *chain = draw_input(rng);
  auto span = static_cast<std::uint64_t>(options.max_ops - options.min_ops + 1);
  std::size_t length = static_cast<std::size_t>(options.min_ops) + rng.below(span);
  while (chain->steps.size() < length && !chain->tensor().closed) {
    bool planned_last = chain->steps.size() + 1 == length;
    if (!append_op(rng, options.min_ops, planned_last, chain)) return false;
  }
  return true;
}

// --- sizing for the H200
// ---------------------------------------------------------------------------

// What eager fp32 PyTorch reaches on the H200: memory-bound kernels, SGEMM (matmul takes no
// TF32 by default), cuDNN convolutions (which do), and the launch cost of each kernel.
constexpr double kGpuBandwidth = 3.0e12;
constexpr double kGpuGemmFlops = 45e12;
constexpr double kGpuConvFlops = 120e12;
constexpr double kGpuLaunchSeconds = 6e-6;
constexpr double kTargetSeconds = 2e-3;
constexpr double kMinSeconds = 0.6e-3;
constexpr double kMaxSeconds = 15e-3;
// `tasks check` runs shrunk by this factor on two CPU cores, which must take well under 0.2 s.
constexpr double kCheckShrink = 64;
constexpr double kCpuBandwidth = 2e9;
constexpr double kCpuGemmFlops = 30e9;
constexpr double kCpuConvFlops = 15e9;
constexpr double kMaxCpuSeconds = 0.1;
constexpr std::int64_t kMaxTensorElements = std::int64_t{1} << 28;
constexpr double kMinShrunkOutputs = 128;

double gpu_seconds(const Chain& chain, double batch) {
  double total = 0;
  for (const Step& s : chain.steps) {
    double work = (batch * s.unit_bytes + s.fixed_bytes) / kGpuBandwidth +
                  batch * s.unit_gemm_flops / kGpuGemmFlops +
                  batch * s.unit_conv_flops / kGpuConvFlops;
    total += std::max(work, s.kernels * kGpuLaunchSeconds);
  }
  return total;
}

/// Batch units left at --shrink kCheckShrink: every SCALABLE_SIZES constant divided, at least 1
/// left (a free seq_len scales a unit's work too).
double shrunk_units(const Chain& chain, double batch) {
  double units = std::max(1.0, std::floor(batch / kCheckShrink));
  for (std::size_t i = 1; i < chain.constants.size(); ++i) {
    const SizeConstant& c = chain.constants[i];
    auto v = static_cast<double>(c.value);
    if (c.batch_like && !c.pinned) units *= std::max(1.0, std::floor(v / kCheckShrink)) / v;
  }
  return units;
}

double shrunk_cpu_seconds(const Chain& chain, double batch) {
  double units = shrunk_units(chain, batch), total = 0;
  for (const Step& s : chain.steps) {
    total += (units * s.unit_bytes + s.fixed_bytes) / kCpuBandwidth +
             units * (s.unit_gemm_flops / kCpuGemmFlops + s.unit_conv_flops / kCpuConvFlops);
  }
  return total;
}

/// Sets the batch to the power of two that brings the estimated eager time nearest the target
/// among those a shrunk check runs quickly at; false when that time is outside the window.
bool choose_batch(Chain* chain) {
  std::int64_t widest = 1;
  for (const TensorState& state : chain->history) {
    std::int64_t n = 1;
    for (const task_synth::Dim& d : state.dims) n *= chain->extent(d);
    widest = std::max(widest, n);
  }
  bool rows = chain->history[0].dims.size() == 2;  // the batch is all the rows there is
  std::int64_t best = 0;
  double best_distance = 0;
  for (std::int64_t batch = rows ? 256 : 4; batch * widest <= kMaxTensorElements; batch *= 2) {
    auto b = static_cast<double>(batch);
    if (shrunk_cpu_seconds(*chain, b) > kMaxCpuSeconds) break;
    // A shrunk run must still return enough values to tell a computation from a constant.
    double shrunk_outputs = shrunk_units(*chain, b) * static_cast<double>(chain->elements());
    if (shrunk_outputs < kMinShrunkOutputs) continue;
    double distance = std::fabs(std::log(gpu_seconds(*chain, b) / kTargetSeconds));
    if (best == 0 || distance < best_distance) {
      best = batch;
      best_distance = distance;
    }
  }
  if (best == 0) return false;
  double seconds = gpu_seconds(*chain, static_cast<double>(best));
  if (seconds < kMinSeconds || seconds > kMaxSeconds) return false;
  chain->constants[0].value = best;
  return true;
}

// --- the task file -------------------------------------------------------------------------------

/// text wrapped at 100 columns, each line indented.
std::string wrap(const std::string& text, const std::string& indent) {
  std::string out, line;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    std::string word = text.substr(start, end - start);
    if (!line.empty() && indent.size() + line.size() + 1 + word.size() > 100) {
      out += indent + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    start = end + 1;
  }
  if (!line.empty()) out += indent + line + "\n";
  return out;
}

std::string input_shape(const Chain& chain) {
  std::vector<std::string> dims;
  for (const task_synth::Dim& d : chain.history[0].dims) dims.push_back(chain.size_expr(d));
  return join(dims, ", ");
}

std::string render_docstring(const Chain& chain) {
  std::size_t n = chain.steps.size();
  std::string head = n == 1 ? "Applies one operator to x of shape (" + input_shape(chain) + "):"
                            : "Applies " + std::to_string(n) +
                                  " operators in turn to x of shape (" + input_shape(chain) + "):";
  std::string out = "    \"\"\"" + head + "\n\n";
  for (std::size_t i = 0; i < n; ++i) {
    out += "    " + std::to_string(i + 1) + ". " + chain.steps[i].summary + "\n";
  }
  bool gemm = false, conv = false;
  for (const Step& s : chain.steps) {
    gemm = gemm || s.unit_gemm_flops > 0;
    conv = conv || s.unit_conv_flops > 0;
  }
  std::string heavy = gemm && conv ? "matrix products and convolutions"
                      : gemm       ? "matrix product"
                                   : "convolution";
  std::string saving =
      gemm || conv
          ? "Eager PyTorch runs each step as its own kernel and writes every intermediate to "
            "memory; a fused kernel can apply the steps around the " +
                heavy + " in its prologue and epilogue instead of in separate passes."
          : "Eager PyTorch runs each step as its own kernel and writes every intermediate to "
            "memory; a fused kernel reads x once and writes the result once.";
  return out + "\n" + wrap(saving, "    ") + "    \"\"\"\n";
}

/// The size constants __init__ takes, in order of first use.
std::vector<int> init_constants(const Chain& chain) {
  std::vector<int> out;
  for (const Step& s : chain.steps) {
    for (int c : s.init_constants) {
      if (c >= 0 && std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
    }
  }
  return out;
}

std::string render_model(const Chain& chain) {
  std::string out = "class Model(nn.Module):\n" + render_docstring(chain) + "\n";
  std::vector<std::string> params = {"self"};
  for (int c : init_constants(chain)) params.push_back(chain.constants[c].name + ": int");
  out += "    def __init__(" + join(params, ", ") + "):\n";
  out += "        super().__init__()\n";
  for (const Step& s : chain.steps) {
    for (const std::string& line : s.init_lines) out += "        " + line + "\n";
  }
  std::set<int> saved;
  for (const Step& s : chain.steps) {
    if (s.skip_source >= 0) saved.insert(s.skip_source);
  }
  out += "\n    def forward(self, x: torch.Tensor) -> torch.Tensor:\n";
  if (saved.count(0)) out += "        skip0 = x\n";
  for (std::size_t i = 0; i < chain.steps.size(); ++i) {
    bool last = i + 1 == chain.steps.size();
    out += std::string("        ") + (last ? "return " : "x = ") + chain.steps[i].expr + "\n";
    int produced = static_cast<int>(i) + 1;
    if (!last && saved.count(produced)) out += "        skip" + std::to_string(produced) + " = x\n";
  }
  return out;
}

std::string render_sizes_and_inputs(const Chain& chain) {
  std::string out;
  std::vector<std::string> scalable;
  for (const SizeConstant& c : chain.constants) {
    out += c.name + " = " + std::to_string(c.value) + "\n";
    if (c.batch_like && !c.pinned) scalable.push_back("\"" + c.name + "\"");
  }
  out += "\nSCALABLE_SIZES = (" + join(scalable, ", ") + (scalable.size() == 1 ? ",)" : ")");
  std::string draw = "torch.randn(" + input_shape(chain) + ")";
  if (chain.input_scale != 1) draw += " * " + python_float(chain.input_scale);
  if (chain.input_offset != 0) draw += " + " + python_float(chain.input_offset);
  out += "\n\n\ndef get_inputs():\n    return [" + draw + "]\n";
  std::vector<std::string> args;
  for (int c : init_constants(chain)) args.push_back(chain.constants[c].name);
  out += "\n\ndef get_init_inputs():\n    return [" + join(args, ", ") + "]\n";
  return out;
}

std::string render_source(const Chain& chain) {
  return "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n" +
         render_model(chain) + "\n\n" + render_sizes_and_inputs(chain);
}

/// What makes two tasks the same: the operators with their structural parameters and every
/// size. Literals (a scale factor, clamp bounds, the input's offset) do not tell tasks apart.
std::string signature(const Chain& chain) {
  std::string out;
  for (const Step& s : chain.steps) out += s.signature + ";";
  for (const SizeConstant& c : chain.constants) out += c.name + "=" + std::to_string(c.value) + ";";
  return out;
}

Status check_options(const SynthOptions& o) {
  if (o.count < 1 || o.count > kMaxSynthCount) {
    return Status::InvalidArgument("synth count must be between 1 and " +
                                   std::to_string(kMaxSynthCount) + ", not " +
                                   std::to_string(o.count));
  }
  if (o.min_ops < 1 || o.max_ops > kMaxSynthOps || o.min_ops > o.max_ops) {
    return Status::InvalidArgument(
        "synth needs 1 <= min_ops <= max_ops <= " + std::to_string(kMaxSynthOps) +
        ", not min_ops " + std::to_string(o.min_ops) + " and max_ops " + std::to_string(o.max_ops));
  }
  if (o.max_fruitless_draws < 1) {
    return Status::InvalidArgument("synth max_fruitless_draws must be at least 1, not " +
                                   std::to_string(o.max_fruitless_draws));
  }
  return Status::OK();
}

}  // namespace

Status synthesize_tasks(const SynthOptions& options, std::vector<SynthTask>* tasks) {
  tasks->clear();
  Status s = check_options(options);
  if (!s.ok()) return s;
  Rng rng(options.seed);
  std::set<std::string> seen;
  int fruitless = 0;
  long long draws = 0;
  while (static_cast<int>(tasks->size()) < options.count) {
    ++draws;
    Chain chain;
    if (draw_chain(rng, options, &chain) && choose_batch(&chain) &&
        seen.insert(signature(chain)).second) {
      char id[64];
      std::snprintf(id, sizeof id, "synth_s%llu_%04zu",
                    static_cast<unsigned long long>(options.seed), tasks->size());
      SynthTask task{id, render_source(chain), {}};
      for (const Step& step : chain.steps) task.ops.push_back(step.op);
      tasks->push_back(std::move(task));
      fruitless = 0;
    } else if (++fruitless >= options.max_fruitless_draws) {
      std::size_t found = tasks->size();
      tasks->clear();
      return Status::InvalidArgument(
          "synth found only " + std::to_string(found) + " distinct tasks of " +
          std::to_string(options.min_ops) + " to " + std::to_string(options.max_ops) +
          " operators in " + std::to_string(draws) + " draws, not the " +
          std::to_string(options.count) +
          " asked for: that space is exhausted; ask for fewer or allow more operators");
    }
  }
  return Status::OK();
}

}  // namespace cuda_agent
