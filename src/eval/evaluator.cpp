#include "eval/evaluator.h"

#include <chrono>
#include <random>

#include "eval/harness.h"
#include "eval/reward.h"
#include "util/files.h"
#include "util/hash.h"
#include "util/text.h"
#include "workspace/workspace.h"

namespace cuda_agent {

namespace fs = std::filesystem;

/// Everything one evaluation keeps between its stages.
struct Evaluator::Run {
  fs::path workspace;
  WorkspaceRecord record;
  TempDir dir{"cuda-agent-run-"};
  fs::path task_file;                // the recorded task text, in a private folder
  fs::path library;                  // the compiled kernels
  unsigned long long seed = 0;       // secret: never given to a candidate process
  unsigned long long init_seed = 0;  // weights; the candidate builds ModelNew with it
  nlohmann::json prepared;           // prepare.py's report
  std::unique_ptr<Harness> harness;  // starts the harness processes, files in dir
  nlohmann::json timings = nlohmann::json::array();  // one entry per harness process
};

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

unsigned long long draw_seed() {
  std::random_device device;
  unsigned long long seed = (static_cast<unsigned long long>(device()) << 32) | device();
  return seed & ((1ULL << 40) - 1);  // room for seed + set offsets below torch's 2^64 limit
}

std::string fixed(double value, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, value);
  return buffer;
}

/// Last lines of a stderr log, which for Python is where the exception or the faulthandler
/// stack is.
std::string stderr_tail(const std::string& text) { return trim_lines(text, 0, 25); }

/// Turns a candidate process's end into an outcome. Returns false when it ran cleanly and its
/// report says ok.
bool candidate_failed(const std::string& what, const ProcessResult& p, const nlohmann::json& report,
                      const std::string& stderr_text, EvalResult* r, StageReport* stage) {
  stage->log = stderr_tail(stderr_text);
  if (p.interrupted) {
    r->outcome = Outcome::kInterrupted;
    r->reason = "interrupted during " + what;
  } else if (p.timed_out) {
    r->outcome = Outcome::kTimeout;
    r->reason = "the candidate's " + what + " process " + p.describe() +
                " (a hang, an endless loop, or a kernel that never finishes)";
  } else if (p.memory_exceeded) {
    r->outcome = Outcome::kCrash;
    r->reason = "the candidate's " + what + " process " + p.describe();
  } else if (p.signal != 0) {
    r->outcome = Outcome::kCrash;
    r->reason = "the candidate's " + what + " process was " + p.describe();
    std::string where = last_line(stderr_text);
    if (!where.empty()) r->reason += "; last output: " + where;
  } else if (report.is_null()) {
    r->outcome = Outcome::kCrash;
    r->reason = "the candidate's " + what + " process " + p.describe() +
                " without writing its report: " + last_line(stderr_text);
  } else {
    for (const auto& v : report_field(report, "violations", nlohmann::json::array())) {
      r->violations.push_back({report_field(v, "rule", "unknown"), report_field(v, "detail", "")});
    }
    if (report_field(report, "ok", false) && r->violations.empty()) return false;
    std::string kind = report_field(report, "error_kind", "exception");
    std::string error = report_field(report, "error", "no reason given");
    std::string traceback = report_field(report, "traceback", "");
    if (!traceback.empty()) stage->log = traceback;
    if (kind == "violation" || !r->violations.empty()) {
      r->outcome = Outcome::kViolation;
      r->reason = r->violations.empty() ? error : r->violations.front().detail;
    } else if (kind == "output") {
      r->outcome = Outcome::kViolation;
      r->violations.push_back({"output_type", error});
      r->reason = error;
    } else if (kind == "load") {
      r->outcome = Outcome::kRuntimeError;
      r->reason = "model_new.py could not be loaded: " + error;
    } else {
      r->outcome = Outcome::kRuntimeError;
      r->reason = "the candidate raised during " + what + ": " + error;
    }
  }
  stage->status = "failed";
  stage->detail = r->reason;
  return true;
}

}  // namespace

Evaluator::Evaluator(EvalOptions options, ProcessRunner* runner, Store* store, Progress progress)
    : options_(std::move(options)), runner_(runner), store_(store), progress_(std::move(progress)) {
  const bool cuda = options_.device == "cuda";
  if (options_.warmup <= 0) options_.warmup = cuda ? 10 : 3;
  if (options_.iters <= 0) options_.iters = cuda ? 100 : 20;
  if (options_.flush_mb < 0) options_.flush_mb = cuda ? 256 : 16;
  options_.compile.device = options_.device;
  if (options_.compile.runtime_dir.empty())
    options_.compile.runtime_dir = options_.harness_dir / "runtime";
}

void Evaluator::progress(const std::string& line) const {
  if (progress_) progress_(line);
}

Status Evaluator::record(Run& run, const HarnessCall& call, const HarnessResult& result) const {
  const ProcessResult& p = result.process;
  run.timings.push_back(
      {{"script", call.script},
       {"wall_s", p.wall_s},
       {"peak_rss_mb", p.peak_rss_mb},
       {"gated", !call.gate.empty()},
       {"phases", report_field(result.report, "phases", nlohmann::json::object())}});
  if (!p.started || p.exit_code == 127) {
    return Status::NotFound("cannot run " + options_.python + " for the harness (" + p.describe() +
                            "); install Python 3 with torch, or pass --python");
  }
  return Status::OK();
}

Status Evaluator::run_harness(Run& run, const std::string& script,
                              const std::vector<std::string>& args, double timeout_s,
                              bool candidate, HarnessResult* result) {
  HarnessStep step(run.harness.get(), make_call(run, script, args, timeout_s, candidate, false));
  *result = step.go();
  return record(run, step.call(), *result);
}

HarnessCall Evaluator::make_call(Run& run, const std::string& script,
                                 const std::vector<std::string>& args, double timeout_s,
                                 bool candidate, bool gated) {
  if (!candidate) return run.harness->call(script, args, timeout_s, run.dir.path(), {}, gated);
  return run.harness->call(script, args, timeout_s, run.workspace,
                           {{"CUDA_AGENT_KERNEL_LIB", run.library.string()}}, gated);
}

std::unique_ptr<HarnessStep> Evaluator::launch(Run& run, const std::string& script,
                                               const std::vector<std::string>& args,
                                               double timeout_s, bool candidate, bool gated) {
  return std::make_unique<HarnessStep>(run.harness.get(),
                                       make_call(run, script, args, timeout_s, candidate, gated));
}

Status Evaluator::prepare(Run& run, HarnessStep& prepare, EvalResult* r) {
  HarnessResult h = prepare.go();
  Status s = record(run, prepare.call(), h);
  if (!s.ok()) return s;
  if (h.process.interrupted) return Status::Internal("interrupted");
  if (h.report.is_null() || !report_field(h.report, "ok", false)) {
    std::string why = h.report.is_null() ? h.process.describe() + ": " + last_line(h.output)
                                         : report_field(h.report, "error", "unknown error");
    std::string kind = report_field(h.report, "error_kind", "");
    if (kind == "usage" || kind == "internal") {
      // Not the task's fault: the device asked for is missing, or the harness itself failed.
      return Status::InvalidArgument("the harness cannot run on --device " + options_.device +
                                     ": " + why);
    }
    return Status::InvalidArgument("the task " + r->task_path + " does not run: " + why);
  }
  run.prepared = h.report;
  r->device_name = report_field(h.report, "device_name", "");
  r->torch_version = report_field(h.report, "torch", "");
  return Status::OK();
}

Status Evaluator::verify(Run& run, HarnessStep& candidate, HarnessStep& check, EvalResult* r) {
  progress("verify: running the candidate on " + std::to_string(options_.verify_sets) +
           " fresh input sets");
  HarnessResult h = candidate.go();
  Status s = record(run, candidate.call(), h);
  if (!s.ok()) return s;
  r->sandbox["network_isolated"] = h.process.network_isolated;
  r->verify.data["candidate"] = h.report;
  if (candidate_failed("verification", h.process, h.report, h.output, r, &r->verify)) {
    return Status::OK();
  }

  // The comparison runs in a trusted process that builds the reference only now.
  h = check.go();
  s = record(run, check.call(), h);
  if (!s.ok()) return s;
  const nlohmann::json& report = h.report;
  r->verify.data["check"] = report;
  if (h.process.interrupted) {
    r->outcome = Outcome::kInterrupted;
    r->reason = "interrupted during verification";
    return Status::OK();
  }
  if (report.is_null()) {
    return Status::Internal("the trusted checker " + h.process.describe() + ": " +
                            last_line(h.output));
  }
  if (!report_field(report, "ok", false)) {
    std::string kind = report_field(report, "error_kind", "");
    if (kind == "task") {
      return Status::InvalidArgument("the task " + r->task_path +
                                     " does not run: " + report_field(report, "error", ""));
    }
    r->outcome = Outcome::kRuntimeError;
    r->reason = "the candidate's outputs could not be read: " + report_field(report, "error", "");
    r->verify.status = "failed";
    r->verify.detail = r->reason;
    return Status::OK();
  }
  if (report.contains("inputs_modified") && report["inputs_modified"].is_object()) {
    const auto& m = report["inputs_modified"];
    std::string detail = "forward modified input " + std::to_string(report_field(m, "input", 0)) +
                         " of input set " + std::to_string(report_field(m, "set", 0)) +
                         "; inputs must be left unchanged";
    r->violations.push_back({"inputs_modified", detail});
    r->outcome = Outcome::kViolation;
    r->reason = detail;
    r->verify.status = "failed";
    r->verify.detail = detail;
    return Status::OK();
  }
  if (!report_field(report, "correct", false)) {
    const auto& m = report_field(report, "mismatch", nlohmann::json::object());
    r->outcome = Outcome::kMismatch;
    r->reason = report_field(m, "detail", std::string("outputs differ from the reference"));
    r->verify.status = "failed";
    r->verify.detail = r->reason;
    return Status::OK();
  }
  r->correct = true;
  r->verify.status = "ok";
  r->verify.detail = "outputs match on " + std::to_string(report_field(report, "sets", 0)) +
                     " input sets (max abs diff " +
                     fixed(report_field(report, "max_abs_diff", 0.0), 6) + ")";
  return Status::OK();
}

Status Evaluator::baseline(Run& run, const std::string& impl, std::optional<double>* median_us,
                           nlohmann::json* data) {
  nlohmann::json settings = {{"schema", "cuda-agent.baseline/1"},
                             {"impl", impl},
                             {"task_sha256", run.record.task_sha256},
                             {"device", options_.device},
                             {"device_name", report_field(run.prepared, "device_name", "")},
                             {"torch", report_field(run.prepared, "torch", "")},
                             {"warmup", options_.warmup},
                             {"iters", options_.iters},
                             {"flush_mb", options_.flush_mb},
                             {"profile_sets", options_.profile_sets}};
  std::string key = sha256_hex(settings.dump());
  if (options_.use_baseline_cache) {
    std::optional<nlohmann::json> cached;
    Status s = store_->get_baseline(key, &cached);
    if (!s.ok()) return s;
    if (cached) {
      *data = *cached;
      (*data)["cached"] = true;
      if (report_field(*cached, "ok", false)) *median_us = report_field(*cached, "median_us", 0.0);
      return Status::OK();
    }
  }
  progress("profile: timing " + std::string(impl == "compile" ? "torch.compile" : "eager") +
           " (measured once, then cached)");
  HarnessResult h;
  Status s =
      run_harness(run, "timing.py", timing_args(run, impl), options_.trusted_timeout_s, false, &h);
  if (!s.ok()) return s;
  if (h.process.interrupted) return Status::Internal("interrupted");
  nlohmann::json report = h.report;
  if (report.is_null()) {
    report = {{"ok", false}, {"error", h.process.describe() + ": " + last_line(h.output)}};
  }
  report["settings"] = settings;
  *data = report;
  (*data)["cached"] = false;
  if (report_field(report, "ok", false)) *median_us = report_field(report, "median_us", 0.0);
  // A baseline that failed is cached too: torch.compile failing on a task is a fact about it.
  return store_->put_baseline(key, report);
}

Status Evaluator::profile(Run& run, HarnessStep& timing, EvalResult* r) {
  auto start = Clock::now();
  nlohmann::json eager, compiled;
  Status s = baseline(run, "eager", &r->eager_us, &eager);
  if (!s.ok()) return s;
  if (!r->eager_us) {
    return Status::InvalidArgument(
        "the task " + r->task_path +
        " could not be timed in eager mode: " + report_field(eager, "error", "unknown error"));
  }
  s = baseline(run, "compile", &r->compile_us, &compiled);
  if (!s.ok()) return s;
  r->profile.data["eager"] = eager;
  r->profile.data["compile"] = compiled;

  progress("profile: timing the candidate (" + std::to_string(options_.iters) + " iterations)");
  HarnessResult h = timing.go();
  s = record(run, timing.call(), h);
  if (!s.ok()) return s;
  const nlohmann::json& report = h.report;
  r->profile.data["candidate"] = report;
  r->profile.seconds = seconds_since(start);
  if (candidate_failed("profiling", h.process, report, h.output, r, &r->profile))
    return Status::OK();
  double median = report_field(report, "median_us", 0.0);
  if (!(median > 0)) {
    r->outcome = Outcome::kRuntimeError;
    r->reason = "the candidate's profile report holds no valid time";
    r->profile.status = "failed";
    r->profile.detail = r->reason;
    return Status::OK();
  }
  r->candidate_us = median;
  r->profile.status = "ok";
  r->profile.detail =
      "median of " + std::to_string(options_.iters) + " timed calls" +
      (report_field(eager, "cached", false) ? ", baselines from the run store" : "");
  if (!r->compile_us) {
    r->profile.detail += "; torch.compile failed on this task (" +
                         report_field(compiled, "error", std::string("unknown error")) +
                         "), so the reward is capped at 2";
  }
  return Status::OK();
}

std::vector<std::string> Evaluator::timing_args(const Run& run, const std::string& impl) const {
  // One list for every implementation: eager, torch.compile and the candidate are timed on the
  // same inputs with the same warm-up, iterations and flush, or the speedups mean nothing.
  std::vector<std::string> args = {"--impl",      impl,
                                   "--task",      run.task_file.string(),
                                   "--init",      (run.dir.path() / "init.pt").string(),
                                   "--inputs",    (run.dir.path() / "profile_inputs.pt").string(),
                                   "--init-seed", std::to_string(run.init_seed),
                                   "--device",    options_.device,
                                   "--warmup",    std::to_string(options_.warmup),
                                   "--iters",     std::to_string(options_.iters),
                                   "--flush-mb",  fixed(options_.flush_mb, 1)};
  if (impl == "candidate") {
    args.insert(args.end(),
                {"--workspace", run.workspace.string(), "--kernel-lib", run.library.string()});
  }
  return args;
}

void Evaluator::start_steps(Run& run, Steps* steps) {
  run.seed = draw_seed();
  run.init_seed = draw_seed();
  // Known before the compile ends: a link to the built library is made here once it exists.
  run.library = run.dir.path() / "libkernels.so";
  const std::string init = (run.dir.path() / "init.pt").string();
  const std::string verify_inputs = (run.dir.path() / "verify_inputs.pt").string();
  const std::string out = (run.dir.path() / "candidate_out.pt").string();
  const std::string seed = std::to_string(run.init_seed);
  steps->prepare = launch(run, "prepare.py",
                          {"--task", run.task_file.string(), "--device", options_.device, "--seed",
                           std::to_string(run.seed), "--init-seed", seed, "--verify-sets",
                           std::to_string(options_.verify_sets), "--profile-sets",
                           std::to_string(options_.profile_sets), "--out", run.dir.path().string()},
                          options_.trusted_timeout_s, false, false);
  steps->candidate = launch(
      run, "run_candidate.py",
      {"--workspace", run.workspace.string(), "--kernel-lib", run.library.string(), "--init", init,
       "--inputs", verify_inputs, "--init-seed", seed, "--device", options_.device, "--out", out},
      options_.verify_timeout_s, true, true);
  steps->check =
      launch(run, "check.py",
             {"--task", run.task_file.string(), "--init", init, "--inputs", verify_inputs,
              "--candidate-out", out, "--init-seed", seed, "--device", options_.device, "--atol",
              fixed(options_.atol, 8), "--rtol", fixed(options_.rtol, 8)},
             options_.trusted_timeout_s, false, true);
  if (options_.stage != "verify") {
    steps->timing = launch(run, "timing.py", timing_args(run, "candidate"),
                           options_.profile_timeout_s, true, true);
  }
}

Status Evaluator::evaluate(const fs::path& workspace, EvalResult* r) {
  *r = EvalResult();
  r->device = options_.device;
  r->stage = options_.stage;
  r->workspace = workspace_key(workspace);
  r->settings = {{"atol", options_.atol},
                 {"rtol", options_.rtol},
                 {"verify_sets", options_.verify_sets},
                 {"profile_sets", options_.profile_sets},
                 {"warmup", options_.warmup},
                 {"iters", options_.iters},
                 {"flush_mb", options_.flush_mb},
                 {"arch", options_.compile.arch}};

  Run run;
  if (options_.keep_run_dir) run.dir.keep();
  // Before its release a gated process waits for the trusted steps, torch.compile included.
  run.harness = std::make_unique<Harness>(
      HarnessOptions{options_.python, options_.harness_dir, options_.memory_limit_mb,
                     3 * options_.trusted_timeout_s + options_.verify_timeout_s},
      runner_, run.dir.path());
  run.workspace = fs::path(r->workspace);
  Status s = verify_workspace(run.workspace, store_, &run.record);
  if (s.code() == Status::Code::kCorruption) {
    r->outcome = Outcome::kViolation;
    r->violations.push_back({"infrastructure_modified", s.message()});
    r->reason = s.message();
  } else if (!s.ok()) {
    return s;
  }
  r->task_path = run.record.task_path;
  r->task_sha256 = run.record.task_sha256;
  r->task_id = fs::path(run.record.task_path).stem().string();

  auto finish = [&]() -> Status {
    // Candidate code ran with the workspace writable to it: prove again that the infrastructure
    // is as it was, so a change made during this evaluation cannot carry into the next.
    if (r->passed() && !run.timings.empty()) {
      WorkspaceRecord again;
      if (Status after = verify_workspace(run.workspace, store_, &again);
          after.code() == Status::Code::kCorruption) {
        r->outcome = Outcome::kViolation;
        r->violations.push_back(
            {"infrastructure_modified", after.message() + " during the evaluation"});
        r->reason = r->violations.back().detail;
      }
    }
    if (options_.stage == "all" || options_.stage == "profile" || !r->passed()) {
      Status rs = apply_reward(options_.recipe, r);
      if (!rs.ok()) return rs;
    }
    if (options_.keep_run_dir) r->sandbox["run_dir"] = run.dir.path().string();
    r->sandbox["processes"] = run.timings;
    return store_->add_evaluation(r->to_json(), &r->id);
  };
  if (!r->passed()) return finish();

  // The reference always comes from the recorded task text, in a folder of its own.
  fs::create_directories(run.dir.path() / "task");
  run.task_file = run.dir.path() / "task" / (r->task_id + ".py");
  s = write_file_atomic(run.task_file, run.record.task_source);
  if (!s.ok()) return s;

  Steps steps;
  if (options_.stage != "compile") start_steps(run, &steps);

  progress("compile: building kernels/ for " + options_.device);
  CompileReport compiled;
  s = compile_kernels(run.workspace / "kernels", options_.compile, runner_, &compiled);
  if (!s.ok()) return s;
  r->compile.seconds = compiled.seconds;
  r->compile.data = compiled.to_json();
  r->compile.data.erase("log");
  r->compile.log = compiled.log;
  if (!compiled.ok) {
    r->outcome = Outcome::kCompileError;
    r->reason = compiled.error;
    const std::string& first = compiled.first_error;
    if (!first.empty()) r->reason += ": " + first.substr(0, first.find('\n'));
    r->compile.status = "failed";
    r->compile.detail = r->reason;
    return finish();
  }
  r->compiled = true;
  if (options_.stage == "compile") {
    run.library = compiled.library;
  } else {
    std::error_code ec;
    fs::create_symlink(compiled.library, run.library, ec);
    if (ec)
      return Status::IoError("cannot link the kernel library into the run folder: " + ec.message());
  }
  r->compile.status = compiled.cached ? "cached" : "ok";
  r->compile.detail = compiled.cached
                          ? "unchanged sources: library reused"
                          : std::to_string(compiled.objects_built) + " object(s) built, " +
                                std::to_string(compiled.objects_cached) + " reused";
  progress("compile: " + r->compile.status + " (" + fixed(compiled.seconds, 2) + " s)");
  if (options_.stage == "compile") {
    r->reason = "kernels/ compiled";
    return finish();
  }

  auto prepare_start = Clock::now();
  progress("verify: drawing inputs and weights from a fresh secret seed");
  s = prepare(run, *steps.prepare, r);
  if (!s.ok()) return s;
  s = verify(run, *steps.candidate, *steps.check, r);
  if (!s.ok()) return s;
  r->verify.seconds = seconds_since(prepare_start);
  progress("verify: " + r->verify.status + " (" + fixed(r->verify.seconds, 2) + " s)");
  if (!r->passed() || options_.stage == "verify") {
    if (r->passed()) r->reason = r->verify.detail;
    return finish();
  }

  s = profile(run, *steps.timing, r);
  if (!s.ok()) return s;
  progress("profile: " + r->profile.status + " (" + fixed(r->profile.seconds, 2) + " s)");
  if (r->passed()) {
    r->reason = "correct; " + r->profile.detail;
  }
  return finish();
}

}  // namespace cuda_agent
