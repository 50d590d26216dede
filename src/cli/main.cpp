// cuda-agent: turns PyTorch modules into faster, verified CUDA kernels. This file is only the
// command line; every command is a thin walk over the library's modules.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "agent/trajectory.h"
#include "cli/bench_command.h"
#include "cli/exit_status.h"
#include "cli/optimize_command.h"
#include "cli/precision_flag.h"
#include "cli/rl_commands.h"
#include "cli/tasks_command.h"
#include "eval/evaluator.h"
#include "eval/reward.h"
#include "sandbox/process_runner.h"
#include "store/store.h"
#include "task/task.h"
#include "util/files.h"
#include "util/paths.h"
#include "workspace/workspace.h"

namespace fs = std::filesystem;
using namespace cuda_agent;

namespace {

std::string default_device() {
  std::error_code ec;
  fs::path gpus = "/proc/driver/nvidia/gpus";
  return fs::is_directory(gpus, ec) && !fs::is_empty(gpus, ec) ? "cuda" : "cpu";
}

Status copy_candidate(const fs::path& candidate, const fs::path& kernels, const fs::path& ws) {
  std::error_code ec;
  if (!fs::is_regular_file(candidate, ec)) {
    return Status::InvalidArgument("candidate " + candidate.string() + " does not exist");
  }
  fs::copy_file(candidate, ws / "model_new.py", fs::copy_options::overwrite_existing, ec);
  if (ec) return Status::IoError("cannot copy " + candidate.string() + ": " + ec.message());
  if (kernels.empty()) return Status::OK();
  if (!fs::is_directory(kernels, ec)) {
    return Status::InvalidArgument("kernels folder " + kernels.string() + " does not exist");
  }
  fs::copy(kernels, ws / "kernels",
           fs::copy_options::recursive | fs::copy_options::overwrite_existing, ec);
  if (ec) return Status::IoError("cannot copy " + kernels.string() + ": " + ec.message());
  return Status::OK();
}

}  // namespace

int run(int argc, char** argv);

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    // A broken invariant, not a verdict: say so plainly rather than abort.
    std::cerr << "cuda-agent: internal error: " << e.what() << "\n";
    return kExitError;
  }
}

int run(int argc, char** argv) {
  CLI::App app{"cuda-agent: turn PyTorch modules into faster, verified CUDA kernels"};
  app.require_subcommand(1);
  app.fallthrough();  // --store may also follow the subcommand
  std::string store_path;
  app.add_option(
      "--store", store_path,
      "run store (SQLite); default $CUDA_AGENT_STORE or ~/.cache/cuda-agent/store.sqlite");

  // init
  auto* init = app.add_subcommand("init", "lay out an episode workspace for a task");
  std::string init_task, init_dir, init_device = default_device();
  init->add_option("task", init_task,
                   "KernelBench-format task file (Model, get_inputs, get_init_inputs)")
      ->required();
  init->add_option("dir", init_dir, "new workspace folder (missing or empty)")->required();
  init->add_option("--device", init_device, "cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();

  // eval
  auto* eval = app.add_subcommand("eval", "compile, verify, profile and reward a candidate");
  std::string workspace, task_path, candidate_path, kernels_path;
  EvalOptions options;
  options.device = default_device();
  std::string cache_dir;
  bool as_json = false;
  bool explain = false;
  bool no_cache = false;
  std::string source_rules = "enforce";
  eval->add_option("workspace", workspace, "workspace laid out by `cuda-agent init`");
  eval->add_option("--task", task_path, "task file, to evaluate --candidate without a workspace");
  eval->add_option("--candidate", candidate_path, "model_new.py to evaluate against --task");
  eval->add_option("--kernels", kernels_path,
                   "kernels/ folder of the candidate (with --candidate)");
  eval->add_option("--device", options.device, "cpu or cuda (default: cuda where a GPU is present)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  eval->add_option("--stage", options.stage, "stop after: compile, verify, or run all (profile)")
      ->check(CLI::IsMember({"compile", "verify", "profile", "all"}))
      ->capture_default_str();
  eval->add_flag("--json", as_json, "print the result record as JSON on stdout");
  eval->add_flag("--explain", explain, "also print every check that ran and what it saw");
  eval->add_option("--source-rules", source_rules,
                   "enforce: a broken source rule fails the candidate before its code runs; "
                   "warn: findings are warnings (the run-time checks still apply)")
      ->check(CLI::IsMember({"enforce", "warn"}))
      ->capture_default_str();
  eval->add_option("--atol", options.atol, "absolute tolerance")->capture_default_str();
  eval->add_option("--rtol", options.rtol, "relative tolerance")->capture_default_str();
  eval->add_option("--shrink", options.shrink,
                   "divide the task's SCALABLE_SIZES constants by this (a smaller run of the "
                   "same computation; the sizes used are recorded)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  add_tf32_flag(eval, &options.precision, "", "the result records it");
  eval->add_option("--verify-sets", options.verify_sets, "fresh random input sets checked")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  eval->add_option("--profile-sets", options.profile_sets, "input sets rotated while timing")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  eval->add_option("--warmup", options.warmup, "warm-up calls (default cpu 3, cuda 10)");
  eval->add_option("--iters", options.iters, "timed calls (default cpu 20, cuda 100)");
  eval->add_option("--flush-mb", options.flush_mb,
                   "cache-flush buffer in MiB (default cpu 16, cuda 256)");
  eval->add_option("--arch", options.compile.arch, "nvcc -arch for the cuda device")
      ->capture_default_str();
  eval->add_option("--verify-timeout", options.verify_timeout_s,
                   "seconds the candidate may take to verify")
      ->capture_default_str();
  eval->add_option("--profile-timeout", options.profile_timeout_s,
                   "seconds the candidate may take to profile")
      ->capture_default_str();
  eval->add_option("--compile-timeout", options.compile.timeout_s,
                   "seconds per compiler invocation")
      ->capture_default_str();
  eval->add_option("--memory-limit-mb", options.memory_limit_mb, "resident memory per process")
      ->capture_default_str();
  eval->add_flag("--no-baseline-cache", no_cache, "re-time eager and torch.compile even if cached");
  eval->add_option("--baseline-scope", options.baseline_scope,
                   "time eager and torch.compile for this scope alone, once, rather than take "
                   "the store's");
  eval->add_option("--recipe", options.recipe, "reward recipe: " + recipe_names())
      ->capture_default_str();
  eval->add_option("--python", options.python, "Python with torch, for the harness")
      ->capture_default_str();
  eval->add_option("--cache-dir", cache_dir,
                   "build cache: objects, libraries and the harness's Python bytecode (default "
                   "~/.cache/cuda-agent/build)");
  eval->add_option("--jobs", options.compile.jobs, "parallel compiles (default: one per core)");
  eval->add_option("--device-lock", options.device_lock,
                   "hold this lock file while verifying and timing on the device, so that "
                   "processes sharing a GPU take turns (bench and serve set one per GPU)");
  eval->add_flag("--keep-run-dir", options.keep_run_dir,
                 "keep the private run folder (logs, inputs)");

  // show
  auto* show = app.add_subcommand("show", "print a stored evaluation, or an episode's trajectory");
  std::string show_id;
  bool show_json = false;
  show->add_option("id", show_id,
                   "an evaluation id as eval prints it (12), or a run as optimize --policy llm "
                   "prints it (r3)")
      ->required();
  show->add_flag("--json", show_json, "print the record as JSON");

  TasksCommand tasks(&app, default_device());
  OptimizeCommand optimize(&app, default_device());
  BenchCommands benches(&app, default_device());
  RlCommands rl(&app, default_device());

  CLI11_PARSE(app, argc, argv);
  install_interrupt_handlers();
  if (tasks.chosen()) return tasks.run();
  if (optimize.chosen()) return optimize.run(store_path);
  if (benches.chosen()) return benches.run(store_path);
  if (rl.chosen()) return rl.run(store_path);

  std::unique_ptr<Store> store;
  if (Status s = open_run_store(store_path, &store); !s.ok()) return fail(s);

  if (*init) {
    Task task;
    if (Status s = load_task(init_task, &task); !s.ok()) return fail(s);
    InitOptions init_options{init_device, harness_dir() / "workspace", self_executable()};
    WorkspaceRecord record;
    if (Status s = init_workspace(task, init_dir, init_options, store.get(), &record); !s.ok()) {
      return fail(s);
    }
    std::cout << "workspace " << record.path << " ready for " << task.id << " on " << init_device
              << "\nwrite kernels/ and model_new.py, then: cuda-agent eval " << init_dir << "\n";
    return kExitPass;
  }

  if (*show) {
    nlohmann::json record;
    if (std::optional<long long> run = agent::parse_run_name(show_id)) {
      if (Status s = store->get_trajectory(*run, &record); !s.ok()) return fail(s);
      record["id"] = *run;
      std::cout << (show_json ? record.dump(2) + "\n" : agent::format_trajectory(record));
      return kExitPass;
    }
    long long id = 0;
    try {
      std::size_t used = 0;
      id = std::stoll(show_id, &used);
      if (used != show_id.size()) throw std::invalid_argument(show_id);
    } catch (const std::exception&) {
      return fail(Status::InvalidArgument("show: " + show_id +
                                          " is neither an evaluation id (12) nor a run (r3)"));
    }
    if (Status s = store->get_evaluation(id, &record); !s.ok()) return fail(s);
    EvalResult stored = EvalResult::from_json(record);
    std::cout << (show_json ? record.dump(2) + "\n"
                            : format_summary(stored) + format_checks(stored));
    return kExitPass;
  }

  // eval
  options.use_baseline_cache = !no_cache;
  options.enforce_source_rules = source_rules == "enforce";
  use_run_folders(&options, cache_dir.empty() ? default_cache_dir() / "build" : fs::path(cache_dir),
                  store->path());
  std::unique_ptr<TempDir> scratch;
  if (workspace.empty()) {
    if (task_path.empty() || candidate_path.empty()) {
      return fail(Status::InvalidArgument(
          "eval needs a workspace, or --task and --candidate (with --kernels for its sources)"));
    }
    Task task;
    if (Status s = load_task(task_path, &task); !s.ok()) return fail(s);
    scratch = std::make_unique<TempDir>("cuda-agent-ws-");
    workspace = (scratch->path() / "ws").string();
    InitOptions init_options{options.device, harness_dir() / "workspace", self_executable()};
    WorkspaceRecord record;
    if (Status s = init_workspace(task, workspace, init_options, store.get(), &record); !s.ok()) {
      return fail(s);
    }
    if (Status s = copy_candidate(candidate_path, kernels_path, workspace); !s.ok()) return fail(s);
  } else if (!task_path.empty() || !candidate_path.empty()) {
    return fail(Status::InvalidArgument("give either a workspace or --task/--candidate, not both"));
  }

  PosixProcessRunner runner;
  Evaluator evaluator(options, &runner, store.get(), [as_json](const std::string& line) {
    if (!as_json) std::cerr << "  " << line << "\n";
  });
  EvalResult result;
  Status evaluated = evaluator.evaluate(workspace, &result);
  if (scratch) {
    // The scratch workspace goes with this command; so does its record.
    if (Status s = store->delete_workspace(workspace_key(workspace)); !s.ok()) return fail(s);
  }
  if (!evaluated.ok()) return fail(evaluated);
  if (as_json) {
    std::cout << result.to_json().dump(2) << "\n";
  } else {
    std::cout << format_summary(result) << (explain ? format_checks(result) : "")
              << "  stored as evaluation " << result.id << " in " << store->path().string() << "\n";
  }
  // No verdict possible, or none reached.
  if (result.outcome == Outcome::kDegenerateTask || result.outcome == Outcome::kInterrupted) {
    return kExitError;
  }
  return result.passed() ? kExitPass : kExitFail;
}
