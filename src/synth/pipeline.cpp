#include "synth/pipeline.h"

#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include "synth/elementwise.h"
#include "synth/model_source.h"
#include "synth/row_plan.h"
#include "util/hash.h"
#include "util/text.h"

namespace cuda_agent::synth {

namespace {

using nlohmann::json;

/// Layout ops that only make views (no data moves), and so run as Python steps: the guard lets
/// views through. contiguous, clone, cat and stack copy: they belong in a kernel, or nowhere.
const std::set<std::string>& view_ops() {
  static const std::set<std::string> names = {
      "view",    "_unsafe_view", "reshape", "flatten", "t",      "unflatten", "transpose",
      "permute", "unsqueeze",    "squeeze", "expand",  "alias",  "detach",    "select",
      "slice",   "chunk",        "split",   "unbind",  "getitem"};
  return names;
}

/// The torch calls that run a GEMM or a convolution, by op name: each takes the aten op's
/// arguments in the aten op's order.
const std::map<std::string, std::string>& library_calls() {
  static const std::map<std::string, std::string> calls = {
      {"linear", "F.linear"},
      {"matmul", "torch.matmul"},
      {"mm", "torch.mm"},
      {"bmm", "torch.bmm"},
      {"addmm", "torch.addmm"},
      {"baddbmm", "torch.baddbmm"},
      {"conv1d", "F.conv1d"},
      {"conv2d", "F.conv2d"},
      {"conv3d", "F.conv3d"},
      {"conv_transpose1d", "F.conv_transpose1d"},
      {"conv_transpose2d", "F.conv_transpose2d"},
      {"conv_transpose3d", "F.conv_transpose3d"},
      {"convolution", "torch.convolution"},
  };
  return calls;
}

bool is_library(const Op& op) {
  return (op.op_class == OpClass::kGemm || op.op_class == OpClass::kConvolution) &&
         library_calls().count(op.name);
}

bool is_view(const Op& op) { return op.op_class == OpClass::kLayout && view_ops().count(op.name); }

bool is_contiguous(const TensorType& t) {
  if (t.stride.empty()) return true;  // not recorded: as made
  if (t.stride.size() != t.shape.size()) return false;
  std::int64_t expected = 1;
  for (std::size_t k = t.shape.size(); k-- > 0;) {
    if (t.shape[k] != 1 && t.stride[k] != expected) return false;
    expected *= t.shape[k];
  }
  return true;
}

/// The Python variable of each value of the graph: inputs, parameters and buffers by their
/// expressions in ModelNew.forward, op values as v_<name>.
std::string variable(const Graph& graph, int index) {
  const Value& v = graph.values[index];
  return v.kind == "op" ? "v_" + v.name : value_expression(v);
}

/// An aten argument as Python: a value's variable, a number, a list, a bool, None, or a word
/// (padding="same"); anything else sets problem.
std::string python_argument(const Graph& graph, const json& a, std::string* problem) {
  if (a.is_object() && a.contains("ref")) {
    return variable(graph, graph.find(a["ref"].get<std::string>()));
  }
  if (a.is_null()) return "None";
  if (a.is_boolean()) return a.get<bool>() ? "True" : "False";
  if (a.is_number()) return a.dump();
  if (a.is_array()) {
    std::vector<std::string> items;
    for (const json& item : a) items.push_back(python_argument(graph, item, problem));
    return "[" + join(items, ", ") + "]";
  }
  static const std::regex word("[a-z_]+");
  if (a.is_string() && std::regex_match(a.get<std::string>(), word)) {
    return "\"" + a.get<std::string>() + "\"";
  }
  *problem = "an argument " + a.dump() + " that is no value, number, list or word";
  return "None";
}

/// The Python expression of a library or view op's result.
std::string step_expression(const Graph& graph, const Op& op, std::string* problem) {
  std::vector<std::string> args;
  for (const json& a : op.args) args.push_back(python_argument(graph, a, problem));
  std::vector<std::string> keywords;
  for (const auto& [key, value] : op.kwargs.items()) {
    keywords.push_back(key + "=" + python_argument(graph, value, problem));
  }
  if (is_library(op)) {
    std::vector<std::string> all = args;
    all.insert(all.end(), keywords.begin(), keywords.end());
    return library_calls().at(op.name) + "(" + join(all, ", ") + ")";
  }
  if (args.empty()) {
    *problem = op.target + " has no operand";
    return "None";
  }
  const std::string self = args[0];
  std::vector<std::string> rest(args.begin() + 1, args.end());
  rest.insert(rest.end(), keywords.begin(), keywords.end());
  if (op.name == "getitem") return self + "[" + join(rest, ", ") + "]";
  if (op.name == "alias") return self;
  if (op.name == "_unsafe_view") return self + ".view(" + join(rest, ", ") + ")";
  if (op.name == "slice") {
    if (!keywords.empty()) {
      *problem = op.target + " with keyword arguments";
      return "None";
    }
    const auto at = [&](std::size_t k, const std::string& fallback) {
      return k < rest.size() ? rest[k] : fallback;
    };
    return self + "[(slice(None),) * " + at(0, "0") + " + (slice(" + at(1, "None") + ", " +
           at(2, "None") + ", " + at(3, "1") + "),)]";
  }
  return self + "." + op.name + "(" + join(rest, ", ") + ")";
}

/// Why op, a library or view step, would not run as the torch call it becomes, or nullptr: a
/// view of memory that is not contiguous copies it (aten::clone, torch compute the guard
/// refuses), and so does torch.matmul of a vector (aten::mv, no library GEMM).
const char* copies(const Graph& graph, const Op& op) {
  static const std::set<std::string> reshapes = {"view", "_unsafe_view", "reshape", "flatten",
                                                 "unflatten"};
  if (op.inputs.empty()) return nullptr;
  const auto& source = graph.values[op.inputs[0]].results;
  if (reshapes.count(op.name) && source.size() == 1 && !is_contiguous(source[0])) {
    return " reshapes a strided view, which copies it";
  }
  if (op.name == "matmul") {
    for (int input : op.inputs) {
      const auto& r = graph.values[input].results;
      if (r.size() == 1 && r[0].shape.size() < 2) return " of a vector runs as aten::mv";
    }
  }
  return nullptr;
}

/// A kernel step with the files its plan wrote (model_new.py and a kernel source, before their
/// entry is renamed) and that entry's name.
struct Kernel {
  PipelineStep step;
  Candidate files;
  std::string entry;
};

/// The elementwise plan for step's run, else the row plan; the refusal names both plans'
/// reasons.
Status plan_kernel(const Graph& graph, const PipelineStep& step, const std::string& device,
                   Kernel* kernel) {
  const Graph sub = step_graph(graph, step);
  kernel->files = {};
  kernel->entry = "fused_elementwise";
  Status elementwise = synthesize_elementwise(sub, device, &kernel->files);
  if (elementwise.ok()) return elementwise;
  kernel->files = {};
  kernel->entry = "fused_rows";
  Status rows = synthesize_rows(sub, device, &kernel->files);
  if (rows.ok()) return rows;
  return Status::InvalidArgument(elementwise.message() + "; " + rows.message());
}

/// text with every whole-word use of the entry's name given a suffix: the kernel's extern "C"
/// functions, its _config setter and model_new.py's bindings of them.
std::string renamed(const std::string& text, const std::string& entry, const std::string& suffix) {
  static const std::map<std::string, std::regex> patterns = {
      {"fused_elementwise", std::regex(R"(\bfused_elementwise(?=\b|_config\b))")},
      {"fused_rows", std::regex(R"(\bfused_rows(?=\b|_config\b))")}};
  return std::regex_replace(text, patterns.at(entry), entry + suffix);
}

/// A kernel step's reads (values from outside its ops, in first-use order) and outputs (values
/// it makes that other ops read or the task returns); a read that is a strided view is a
/// problem.
void fill_step(const Graph& graph, PipelineStep* step, std::vector<std::string>* problems) {
  step->reads.clear();
  step->outputs.clear();
  std::set<int> inside, op_set(step->ops.begin(), step->ops.end());
  for (int k : step->ops) inside.insert(graph.ops[k].value);
  std::set<int> returned(graph.outputs.begin(), graph.outputs.end());
  for (int k : step->ops) {
    for (int input : graph.ops[k].inputs) {
      if (inside.count(input) ||
          std::find(step->reads.begin(), step->reads.end(), input) != step->reads.end()) {
        continue;
      }
      step->reads.push_back(input);
      const Value& v = graph.values[input];
      if (v.results.size() == 1 && !is_contiguous(v.results[0])) {
        problems->push_back("the fused run from " + graph.ops[step->ops.front()].target +
                            " reads " + v.name + ", a strided view");
      }
    }
    const int value = graph.ops[k].value;
    bool used_later = returned.count(value) > 0;
    for (std::size_t user = 0; user < graph.ops.size() && !used_later; ++user) {
      const auto& in = graph.ops[user].inputs;
      used_later = !op_set.count(static_cast<int>(user)) &&
                   std::find(in.begin(), in.end(), value) != in.end();
    }
    if (used_later) step->outputs.push_back(value);
  }
}

}  // namespace

Status plan_pipeline(const Graph& graph, std::vector<PipelineStep>* steps) {
  steps->clear();
  std::vector<std::string> problems;
  std::set<int> in_run;  // the values the current kernel run makes
  for (std::size_t k = 0; k < graph.ops.size(); ++k) {
    const Op& op = graph.ops[k];
    // An item of a result the run makes (max's values) is the run's to pick.
    const bool run_item = op.name == "getitem" && !op.inputs.empty() && in_run.count(op.inputs[0]);
    if (is_library(op) || (is_view(op) && !run_item)) {
      if (const char* problem = copies(graph, op)) problems.push_back(op.target + problem);
      in_run.clear();
      PipelineStep step;
      step.kind = is_library(op) ? PipelineStep::Kind::kLibrary : PipelineStep::Kind::kView;
      step.ops = {static_cast<int>(k)};
      steps->push_back(std::move(step));
      continue;
    }
    if (op.op_class == OpClass::kUnsupported || op.op_class == OpClass::kPooling ||
        op.op_class == OpClass::kGemm || op.op_class == OpClass::kConvolution) {
      problems.push_back(op.target + " (" + op_class_name(op.op_class) + ") fits no step");
      continue;
    }
    if (steps->empty() || steps->back().kind != PipelineStep::Kind::kKernel) {
      steps->push_back(PipelineStep{});
    }
    steps->back().ops.push_back(static_cast<int>(k));
    in_run.insert(op.value);
  }
  if (steps->size() == 1 && problems.empty()) {
    problems.push_back("it is one fused run, which the one-kernel plans did not take");
  }
  bool kernels = false;
  for (PipelineStep& step : *steps) {
    if (step.kind != PipelineStep::Kind::kKernel) continue;
    kernels = true;
    fill_step(graph, &step, &problems);
  }
  if (!kernels) problems.push_back("it has nothing to fuse around its library ops and views");
  if (!problems.empty()) {
    steps->clear();
    return Status::InvalidArgument("no pipeline: " + join(problems, "; "));
  }
  return Status::OK();
}

Graph step_graph(const Graph& graph, const PipelineStep& step) {
  Graph sub;
  std::map<int, int> index;  // graph's value index -> sub's
  for (int read : step.reads) {
    const Value& v = graph.values[read];
    index[read] = static_cast<int>(sub.values.size());
    sub.values.push_back(Value{v.name, "input", "", v.results, -1, ""});
  }
  for (int k : step.ops) {
    Op op = graph.ops[k];
    for (int& input : op.inputs) input = index.at(input);
    const Value& v = graph.values[op.value];
    op.value = static_cast<int>(sub.values.size());
    index[graph.ops[k].value] = op.value;
    sub.values.push_back(Value{v.name, "op", "", v.results, static_cast<int>(sub.ops.size()), ""});
    sub.ops.push_back(std::move(op));
  }
  for (int out : step.outputs) sub.outputs.push_back(index.at(out));
  return sub;
}

Status synthesize_pipeline(const Graph& graph, const std::string& device, Candidate* candidate) {
  std::vector<PipelineStep> steps;
  if (Status s = plan_pipeline(graph, &steps); !s.ok()) return s;
  const bool cuda = device == "cuda";
  std::string imports, calls, kernels_made, sources;
  std::vector<std::string> summary;
  std::size_t kernel_count = 0;
  std::vector<std::string> problems;
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const PipelineStep& step = steps[k];
    if (step.kind != PipelineStep::Kind::kKernel) {
      const Op& op = graph.ops[step.ops[0]];
      std::string problem;
      const std::string expression = step_expression(graph, op, &problem);
      if (!problem.empty()) problems.push_back(problem);
      calls += "        " + variable(graph, op.value) + " = " + expression + "\n";
      if (step.kind == PipelineStep::Kind::kLibrary) summary.push_back(op.name + " (library)");
      continue;
    }
    // The run as one kernel, else as the fewest kernels found greedily: the longest prefix
    // that a plan takes, then the longest of what is left, and so on (max over one dim, then
    // a mean over another: two kernels).
    std::vector<Kernel> made;
    std::string refusal;
    for (std::size_t first = 0; first < step.ops.size();) {
      Kernel kernel;
      std::size_t last = step.ops.size();
      for (; last > first; --last) {
        kernel.step.ops.assign(step.ops.begin() + first, step.ops.begin() + last);
        std::vector<std::string> strided;
        fill_step(graph, &kernel.step, &strided);
        Status planned = strided.empty() ? plan_kernel(graph, kernel.step, device, &kernel)
                                         : Status::InvalidArgument(join(strided, "; "));
        if (planned.ok()) break;
        if (first == 0 && last == step.ops.size()) refusal = planned.message();
      }
      if (last == first) {
        std::vector<std::string> names;
        for (int op : step.ops) names.push_back(graph.ops[op].name);
        problems.push_back("the run " + join(names, ", ") + " fits no kernel plan: " + refusal);
        break;
      }
      made.push_back(std::move(kernel));
      first = last;
    }
    for (Kernel& kernel : made) {
      const std::string suffix = "_k" + std::to_string(kernel_count);
      const std::string module = "synth_kernel" + std::to_string(kernel_count);
      for (const auto& [path, text] : kernel.files.files) {
        if (path == "model_new.py") {
          candidate->files[module + ".py"] = renamed(text, kernel.entry, suffix);
        } else {
          const std::string extension = path.substr(path.rfind('.'));
          const std::string source = renamed(text, kernel.entry, suffix);
          candidate->files["kernels/" + kernel.entry + suffix + extension] = source;
          sources += source;
        }
      }
      imports += "import " + module + "\n";
      kernels_made += module + ".ModelNew(), ";
      std::vector<std::string> reads, outs;
      for (int read : kernel.step.reads) reads.push_back(variable(graph, read));
      for (int out : kernel.step.outputs) outs.push_back(variable(graph, out));
      calls += "        " + join(outs, ", ") + " = self._kernels[" + std::to_string(kernel_count) +
               "](" + join(reads, ", ") + ")\n";
      std::vector<std::string> names;
      for (int op : kernel.step.ops) names.push_back(graph.ops[op].name);
      summary.push_back(join(names, ", ") + " (" + kernel.entry + suffix + ")");
      ++kernel_count;
    }
  }
  if (!problems.empty()) {
    *candidate = {};
    return Status::InvalidArgument("no pipeline: " + join(problems, "; "));
  }
  std::vector<std::string> returned;
  for (int out : graph.outputs) returned.push_back(variable(graph, out) + graph.output_view);
  candidate->files["model_new.py"] =
      "\"\"\"Generated by cuda-agent's synthesizer: a pipeline, GEMMs and convolutions "
      "through the library (cuBLAS, cuDNN), the ops between them in fused kernels: " +
      join(summary, "; ") +
      ".\"\"\"\n\n"
      "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n" +
      imports +
      "\n\n"
      "class ModelNew(nn.Module):\n"
      "    def __init__(self, *init_inputs):\n"
      "        super().__init__()\n" +
      module_state_source(graph) +
      "        # The fused kernels' callers: they hold no state of their own.\n"
      "        self._kernels = [" +
      kernels_made +
      "]\n\n"
      "    def forward(self" +
      forward_parameters(graph) + "):\n" + calls + "        return " +
      (returned.size() == 1 ? returned[0] : "(" + join(returned, ", ") + ",)") + "\n";
  candidate->configs = {{-1, std::string(cuda ? "each kernel's default launch configuration"
                                              : "each kernel's default schedule")}};
  candidate->pattern = sha256_hex(sources);
  long long total = 1;
  for (int out : graph.outputs) {
    const auto& results = graph.values[out].results;
    if (!results.empty()) {
      for (std::int64_t size : results[0].shape) total *= size;
    }
  }
  candidate->shape_class = size_class(total) + " elements out of a pipeline";
  return Status::OK();
}

}  // namespace cuda_agent::synth
