#include "cli/optimize_command.h"

#include <iostream>

#include "cli/exit_status.h"
#include "eval/evaluator.h"
#include "sandbox/process_runner.h"
#include "store/store.h"
#include "synth/capture.h"
#include "synth/elementwise.h"
#include "synth/rewrite.h"
#include "synth/row_plan.h"
#include "task/task.h"
#include "util/files.h"
#include "util/paths.h"
#include "workspace/workspace.h"

namespace fs = std::filesystem;

namespace cuda_agent {
namespace {

/// A new folder for the episode: DIR/<task id>-synth, -synth-2, ... under the cache.
fs::path fresh_workspace(const std::string& task_id) {
  fs::path base = default_cache_dir() / "episodes";
  std::error_code ec;
  for (int n = 1;; ++n) {
    fs::path dir = base / (task_id + "-synth" + (n == 1 ? "" : "-" + std::to_string(n)));
    if (!fs::exists(dir, ec)) return dir;
  }
}

}  // namespace

struct OptimizeCommand::Args {
  CLI::App* command = nullptr;
  std::string task;
  std::string workspace;
  std::string policy = "synth";
  bool as_json = false;
  EvalOptions eval;
};

OptimizeCommand::OptimizeCommand(CLI::App* app, const std::string& default_device)
    : args_(std::make_unique<Args>()) {
  Args& a = *args_;
  a.eval.device = default_device;
  a.command = app->add_subcommand("optimize",
                                  "write fused kernels for a task with a policy and evaluate them");
  a.command->add_option("task", a.task, "KernelBench-format task file")->required();
  a.command->add_option("--policy", a.policy, "synth: the built-in synthesizer")
      ->check(CLI::IsMember({"synth"}))
      ->capture_default_str();
  a.command->add_option("--device", a.eval.device, "cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  a.command
      ->add_option("--shrink", a.eval.shrink, "divide the task's SCALABLE_SIZES constants by this")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  a.command->add_option("--workspace", a.workspace,
                        "the episode's folder (default ~/.cache/cuda-agent/episodes/TASK-synth)");
  a.command
      ->add_option("--stage", a.eval.stage, "stop after: compile, verify, or run all (profile)")
      ->check(CLI::IsMember({"compile", "verify", "profile", "all"}))
      ->capture_default_str();
  a.command->add_flag("--json", a.as_json, "print the evaluation record as JSON");
}

OptimizeCommand::~OptimizeCommand() = default;

bool OptimizeCommand::chosen() const { return args_->command->parsed(); }

int OptimizeCommand::run(const std::string& store_path) {
  Args& a = *args_;
  Task task;
  if (Status s = load_task(a.task, &task); !s.ok()) return fail(s);
  std::unique_ptr<Store> store;
  if (Status s =
          Store::Open(store_path.empty() ? default_store_path() : fs::path(store_path), &store);
      !s.ok()) {
    return fail(s);
  }
  PosixProcessRunner runner;
  auto say = [&a](const std::string& line) {
    if (!a.as_json) std::cerr << "  " << line << "\n";
  };

  say("capture: tracing " + task.id + " with torch.export");
  synth::CaptureOptions capture;
  capture.harness_dir = harness_dir();
  capture.shrink = a.eval.shrink;
  synth::Graph graph;
  if (Status s = synth::capture_graph(task.path, capture, &runner, &graph); !s.ok()) {
    return fail(s);
  }
  for (const auto& rewrite : synth::rewrite_graph(&graph)) {
    say("rewrite: " + rewrite.name + ": " + rewrite.detail);
  }
  // The plans in order, the first that takes the whole graph writes the candidate.
  std::map<std::string, std::string> files;
  Status elementwise = synth::synthesize_elementwise(graph, a.eval.device, &files);
  if (!elementwise.ok()) {
    files.clear();
    Status rows = synth::synthesize_rows(graph, a.eval.device, &files);
    if (!rows.ok()) {
      return fail(Status::InvalidArgument("the synthesizer has no plan for " + task.id + ": " +
                                          elementwise.message() + "\n" + rows.message()));
    }
  }
  say(std::string("synthesize: one fused ") + (elementwise.ok() ? "elementwise" : "row") +
      " kernel for " + std::to_string(graph.ops.size()) + " ops");

  fs::path dir = a.workspace.empty() ? fresh_workspace(task.id) : fs::path(a.workspace);
  InitOptions init{a.eval.device, harness_dir() / "workspace", self_executable()};
  WorkspaceRecord record;
  if (Status s = init_workspace(task, dir, init, store.get(), &record); !s.ok()) return fail(s);
  for (const auto& [path, text] : files) {
    std::error_code ec;
    fs::create_directories((dir / path).parent_path(), ec);
    if (Status s = write_file_atomic(dir / path, text); !s.ok()) return fail(s);
  }
  say("workspace: " + dir.string());

  EvalOptions& o = a.eval;
  o.harness_dir = harness_dir();
  o.compile.cache_dir = default_cache_dir() / "build";
  std::error_code ec;
  fs::create_directories(o.compile.cache_dir, ec);
  o.protected_paths = {store->path().parent_path(), o.compile.cache_dir};
  Evaluator evaluator(o, &runner, store.get(), say);
  EvalResult result;
  if (Status s = evaluator.evaluate(dir, &result); !s.ok()) return fail(s);
  if (a.as_json) {
    std::cout << result.to_json().dump(2) << "\n";
  } else {
    std::cout << format_summary(result) << "  workspace " << dir.string()
              << "\n  stored as evaluation " << result.id << " in " << store->path().string()
              << "\n";
  }
  return result.passed() ? kExitPass : kExitFail;
}

}  // namespace cuda_agent
