/// The evaluator: compile -> verify -> profile -> reward, each stage in its own sandboxed process.
///
/// Trust: the reference runs only in trusted processes (prepare.py, check.py, the baseline
/// profiles) from the task text recorded in the run store, never from the workspace's copy. The
/// candidate runs first, in a fresh process that never holds reference outputs, on inputs drawn
/// from a seed it is never told; check.py compares what it wrote. Infrastructure checksums are
/// proved before anything runs.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "eval/compiler.h"
#include "eval/harness.h"
#include "eval/result.h"
#include "sandbox/process_runner.h"
#include "store/store.h"
#include "util/status.h"

namespace cuda_agent {

/// The resident-memory limit per harness process when none is given.
long long default_memory_limit_mb();

struct EvalOptions {
  std::string device = "cpu";
  std::string stage = "all";  // "compile", "verify", "profile" (same as all) or "all"
  double atol = 1e-2, rtol = 1e-2;
  /// Each constant the task names in SCALABLE_SIZES divided by this (tasks/README.md): a
  /// smaller run of the same computation, recorded in the result's settings with the sizes used.
  int shrink = 1;
  /// The candidate's precision: "fp32" (full, the default) or "tf32", where cuBLAS and cuDNN
  /// may take its fp32 GEMMs and convolutions in TF32. Eager and torch.compile are timed in full
  /// fp32 either way; the result's settings record it.
  std::string precision = "fp32";
  int verify_sets = 5;
  int profile_sets = 4;
  int warmup = 0;        // 0: the device's default (cpu 3, cuda 10)
  int iters = 0;         // 0: the device's default (cpu 20, cuda 100)
  double flush_mb = -1;  // <0: the device's default (cpu 0, cuda 256)
  double verify_timeout_s = 300;
  double profile_timeout_s = 600;
  double trusted_timeout_s = 900;  // prepare, check and baselines (torch.compile is slow)
  // A full-size task's input sets are gigabytes each: the larger of 32 GiB and 60% of the
  // machine's memory (each harness process runs alone).
  long long memory_limit_mb = default_memory_limit_mb();
  bool use_baseline_cache = true;
  /// Empty: a baseline timed once serves every evaluation of the store on the same GPU model,
  /// task and settings. Else baselines of this scope alone (a bench run's own, timed on its
  /// machine beside its candidates), timed once in it and not used outside it.
  std::string baseline_scope;
  std::string recipe = "discrete";
  bool enforce_source_rules = true;  // false: source rule findings are only warnings
  /// Paths candidate processes may read but never write, besides the ones the evaluator adds
  /// itself (the harness, the run's trusted files, the workspace's infrastructure): the run
  /// store's folder and the build cache, so a candidate cannot forge baselines or plant objects.
  std::vector<std::filesystem::path> protected_paths;
  std::string python = "python3";
  std::filesystem::path harness_dir;
  /// Where trusted harness processes keep the Python bytecode of torch, the standard library and
  /// the harness between evaluations (a process that compiles torch from source starts seconds
  /// later). Candidate processes only read it, so it belongs among protected_paths. Empty: a
  /// fresh folder in each evaluation's trusted files.
  std::filesystem::path bytecode_dir;
  CompileOptions compile;
  /// Held from the first step that runs on the device (drawing the inputs) to the end of the
  /// evaluation, so that evaluations sharing a device (a benchmark's parallel jobs, with one
  /// lock file per GPU) verify and time one candidate at a time; compiles and the harness
  /// processes' start-up run outside it. Empty: no lock.
  std::filesystem::path device_lock;
  bool keep_run_dir = false;  // keep the private run folder, for debugging
};

/// Points options at this installation's harness and at a run's folders: the build cache
/// (created, so that it can be mounted read-only) with the harness's bytecode in it, and the run
/// store's folder and the cache among the paths candidates may not write.
void use_run_folders(EvalOptions* options, const std::filesystem::path& cache_dir,
                     const std::filesystem::path& store_path);

class Evaluator {
 public:
  using Progress = std::function<void(const std::string&)>;
  Evaluator(EvalOptions options, ProcessRunner* runner, Store* store, Progress progress = {});

  /// Evaluates a workspace laid out by init_workspace. A failing candidate is a result (with
  /// reward -1 and a reason), not an error; a non-OK Status means no verdict could be reached:
  /// the workspace is unknown, the task itself fails to run, or the evaluator's own tools are
  /// missing.
  Status evaluate(const std::filesystem::path& workspace, EvalResult* result);

 private:
  struct Run;

  /// A harness process for this run: trusted ones work in the private run folder, candidate ones
  /// in the workspace with the kernel library named in their environment.
  HarnessCall make_call(Run& run, const std::string& script, const std::vector<std::string>& args,
                        double timeout_s, bool candidate, bool gated);
  Status record(Run& run, const HarnessCall& call, const HarnessResult& result) const;
  /// Removes a bundle of the run folder no later step reads (kept with keep_run_dir): at full
  /// size each is gigabytes, and the folder's peak is what its filesystem must hold.
  void discard(const std::filesystem::path& bundle) const;
  std::unique_ptr<HarnessStep> launch(Run& run, const std::string& script,
                                      const std::vector<std::string>& args, double timeout_s,
                                      bool candidate, bool gated);

  /// The harness processes of verify and profile. All start together with the compile, so their
  /// imports (seconds each) overlap it and each other: prepare runs at once, the others wait for
  /// their release (PROTOCOL.md, --wait-for). Any not released when Steps goes away is cancelled.
  struct Steps {
    std::unique_ptr<HarnessStep> rules, prepare, candidate, check;
    std::unique_ptr<HarnessStep> timing, recheck;  // not for stage verify
    // The baselines' timing processes, started with the rest where the run store has never
    // timed the task on this device kind (their start-up is then off the locked device's time).
    std::unique_ptr<HarnessStep> eager, compile;
  };
  void start_steps(Run& run, Steps* steps);
  /// Returns once no step is still starting up (HarnessStep::starting).
  static void wait_for_startups(const Steps& steps);
  /// timing.py's arguments for impl ("eager", "compile" or "candidate").
  std::vector<std::string> timing_args(const Run& run, const std::string& impl) const;
  /// check.py --timed's arguments: the timing process whose secret is at secret_path.
  std::vector<std::string> recheck_args(const Run& run,
                                        const std::filesystem::path& secret_path) const;

  Status source_rules(Run& run, HarnessStep& rules, EvalResult* result);
  Status prepare(Run& run, HarnessStep& prepare, EvalResult* result);
  Status verify(Run& run, HarnessStep& candidate, HarnessStep& check, EvalResult* result);
  Status profile(Run& run, Steps& steps, EvalResult* result);
  /// The checks on the candidate's timed calls that trusted code can make from its own report: a
  /// well-formed report, no time below the physical floor, event time consistent with host time.
  /// False when one failed; else the statistics, timed_host_s and host_overhead_s are in
  /// result->profile.data["candidate"] for overhead_excess().
  bool timing_consistent(const Run& run, const HarnessResult& h, EvalResult* result);
  /// Releases the candidate's timing process and applies the checks above to what it reports,
  /// in result->profile.data["candidate"]; timed is false when the candidate failed one.
  Status time_candidate(Run& run, HarnessStep& timing, EvalResult* result, bool* timed);
  /// T5, T6: the evaluator's clock, from revealing the secret to the process's end, minus the
  /// reported calls is the harness's overhead. Empty when the timed candidate's is what eager's
  /// (measured the same way) allows, else why not; overhead_detail says what was compared.
  std::string overhead_excess(double eager_overhead_s, const EvalResult& result) const;
  std::string overhead_detail(double eager_overhead_s, const EvalResult& result) const;
  Status recheck_timed(Run& run, HarnessStep& recheck, EvalResult* result);
  /// Times impl ("eager", "compile") once, or reads it from the run store; started: its timing
  /// process if start_steps started one (aborted when the store has the baseline after all).
  Status baseline(Run& run, const std::string& impl, std::unique_ptr<HarnessStep> started,
                  std::optional<double>* median_us, nlohmann::json* data);
  /// Times impl now (baseline's measurement, uncached): its report without the raw times, with
  /// statistics and host_overhead_s; median_us is set where it ran.
  Status time_baseline(Run& run, const std::string& impl, std::unique_ptr<HarnessStep> started,
                       nlohmann::json* report, std::optional<double>* median_us);
  void progress(const std::string& line) const;

  EvalOptions options_;
  ProcessRunner* runner_;
  Store* store_;
  Progress progress_;
};

}  // namespace cuda_agent
