#include "eval/evaluator.h"

#include <chrono>
#include <random>

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
  fs::path task_file;        // the recorded task text, in a private folder
  fs::path library;          // the compiled kernels
  unsigned long long seed = 0;       // secret: never given to a candidate process
  unsigned long long init_seed = 0;  // weights; the candidate builds ModelNew with it
  nlohmann::json prepared;   // prepare.py's report
  int processes = 0;         // numbers log files
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

/// A field of a harness report, or def when it is missing or of another type. Reports from a
/// candidate's process are written by code we do not trust, so no shape is assumed.
template <typename T>
T field(const nlohmann::json& j, const char* key, T def) {
  if (!j.is_object()) return def;
  auto it = j.find(key);
  if (it == j.end()) return def;
  if constexpr (std::is_same_v<T, bool>) {
    return it->is_boolean() ? it->template get<bool>() : def;
  } else if constexpr (std::is_arithmetic_v<T>) {
    return it->is_number() ? it->template get<T>() : def;
  } else if constexpr (std::is_same_v<T, std::string>) {
    return it->is_string() ? it->template get<std::string>() : def;
  } else {
    return it->type() == def.type() ? *it : def;
  }
}

std::string field(const nlohmann::json& j, const char* key, const char* def) {
  return field<std::string>(j, key, def);
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
    for (const auto& v : field(report, "violations", nlohmann::json::array())) {
      r->violations.push_back({field(v, "rule", "unknown"), field(v, "detail", "")});
    }
    if (field(report, "ok", false) && r->violations.empty()) return false;
    std::string kind = field(report, "error_kind", "exception");
    std::string error = field(report, "error", "no reason given");
    std::string traceback = field(report, "traceback", "");
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
  if (options_.compile.runtime_dir.empty()) options_.compile.runtime_dir = options_.harness_dir / "runtime";
}

void Evaluator::progress(const std::string& line) const {
  if (progress_) progress_(line);
}

Status Evaluator::run_harness(Run& run, const std::string& script,
                              const std::vector<std::string>& args, double timeout_s,
                              bool candidate, nlohmann::json* report, ProcessResult* process,
                              std::string* stderr_text) {
  int n = ++run.processes;
  fs::path logs = run.dir.path() / "logs";
  fs::create_directories(logs);
  std::string stem = std::to_string(n) + "-" + script.substr(0, script.find('.'));
  fs::path report_path = run.dir.path() / (stem + ".report.json");
  ProcessSpec spec;
  // -E -s: no PYTHON* variables, no user site. pycache_prefix: bytecode never comes from (or goes
  // to) a __pycache__ folder the candidate could have planted.
  spec.argv = {options_.python, "-E", "-s", "-X",
               "pycache_prefix=" + (run.dir.path() / "pycache").string(),
               (options_.harness_dir / script).string()};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.argv.insert(spec.argv.end(), {"--report", report_path.string()});
  spec.cwd = candidate ? run.workspace : run.dir.path();
  if (candidate) spec.env["CUDA_AGENT_KERNEL_LIB"] = run.library.string();
  spec.timeout_s = timeout_s;
  spec.memory_limit_mb = options_.memory_limit_mb;
  spec.stdout_path = logs / (stem + ".out");
  spec.stderr_path = logs / (stem + ".err");
  *process = runner_->run(spec);
  run.timings.push_back({{"script", script}, {"wall_s", process->wall_s},
                         {"peak_rss_mb", process->peak_rss_mb}});
  if (!process->started || process->exit_code == 127) {
    return Status::NotFound("cannot run " + options_.python + " for the harness (" +
                            process->describe() + "); install Python 3 with torch, or pass --python");
  }
  std::string out, err;
  read_file(spec.stdout_path, &out);
  read_file(spec.stderr_path, &err);
  *stderr_text = out.empty() ? err : out + "\n" + err;
  *report = nullptr;
  std::string text;
  if (read_file(report_path, &text).ok()) {
    nlohmann::json parsed = nlohmann::json::parse(text, nullptr, false);
    if (parsed.is_object()) *report = std::move(parsed);
  }
  return Status::OK();
}

Status Evaluator::prepare(Run& run, EvalResult* r) {
  run.seed = draw_seed();
  run.init_seed = draw_seed();
  nlohmann::json report;
  ProcessResult process;
  std::string err;
  Status s = run_harness(run, "prepare.py",
                         {"--task", run.task_file.string(), "--device", options_.device, "--seed",
                          std::to_string(run.seed), "--init-seed", std::to_string(run.init_seed),
                          "--verify-sets", std::to_string(options_.verify_sets), "--profile-sets",
                          std::to_string(options_.profile_sets), "--out", run.dir.path().string()},
                         options_.trusted_timeout_s, false, &report, &process, &err);
  if (!s.ok()) return s;
  if (process.interrupted) return Status::Internal("interrupted");
  if (report.is_null() || !field(report, "ok", false)) {
    std::string why = report.is_null() ? process.describe() + ": " + last_line(err)
                                       : field(report, "error", "unknown error");
    return Status::InvalidArgument("the task " + r->task_path + " does not run: " + why);
  }
  run.prepared = report;
  r->device_name = field(report, "device_name", "");
  r->torch_version = field(report, "torch", "");
  return Status::OK();
}

Status Evaluator::verify(Run& run, EvalResult* r) {
  auto start = Clock::now();
  progress("verify: running the candidate on " + std::to_string(options_.verify_sets) +
           " fresh input sets");
  fs::path out = run.dir.path() / "candidate_out.pt";
  nlohmann::json report;
  ProcessResult process;
  std::string err;
  std::string init = (run.dir.path() / "init.pt").string();
  std::string inputs = (run.dir.path() / "verify_inputs.pt").string();
  Status s = run_harness(run, "run_candidate.py",
                         {"--workspace", run.workspace.string(), "--kernel-lib",
                          run.library.string(), "--init", init, "--inputs", inputs, "--init-seed",
                          std::to_string(run.init_seed), "--device", options_.device, "--out",
                          out.string()},
                         options_.verify_timeout_s, true, &report, &process, &err);
  if (!s.ok()) return s;
  r->sandbox["network_isolated"] = process.network_isolated;
  r->verify.data["candidate"] = report;
  if (candidate_failed("verification", process, report, err, r, &r->verify)) {
    r->verify.seconds = seconds_since(start);
    return Status::OK();
  }

  // The comparison runs in a trusted process that builds the reference itself.
  s = run_harness(run, "check.py",
                  {"--task", run.task_file.string(), "--init", init, "--inputs", inputs,
                   "--candidate-out", out.string(), "--init-seed", std::to_string(run.init_seed),
                   "--device", options_.device, "--atol", fixed(options_.atol, 8), "--rtol",
                   fixed(options_.rtol, 8)},
                  options_.trusted_timeout_s, false, &report, &process, &err);
  if (!s.ok()) return s;
  r->verify.seconds = seconds_since(start);
  r->verify.data["check"] = report;
  if (process.interrupted) {
    r->outcome = Outcome::kInterrupted;
    r->reason = "interrupted during verification";
    return Status::OK();
  }
  if (report.is_null()) {
    return Status::Internal("the trusted checker " + process.describe() + ": " + last_line(err));
  }
  if (!field(report, "ok", false)) {
    std::string kind = field(report, "error_kind", "");
    if (kind == "task") {
      return Status::InvalidArgument("the task " + r->task_path +
                                     " does not run: " + field(report, "error", ""));
    }
    r->outcome = Outcome::kRuntimeError;
    r->reason = "the candidate's outputs could not be read: " + field(report, "error", "");
    r->verify.status = "failed";
    r->verify.detail = r->reason;
    return Status::OK();
  }
  if (report.contains("inputs_modified") && report["inputs_modified"].is_object()) {
    const auto& m = report["inputs_modified"];
    std::string detail = "forward modified input " + std::to_string(field(m, "input", 0)) +
                         " of input set " + std::to_string(field(m, "set", 0)) +
                         "; inputs must be left unchanged";
    r->violations.push_back({"inputs_modified", detail});
    r->outcome = Outcome::kViolation;
    r->reason = detail;
    r->verify.status = "failed";
    r->verify.detail = detail;
    return Status::OK();
  }
  if (!field(report, "correct", false)) {
    const auto& m = field(report, "mismatch", nlohmann::json::object());
    r->outcome = Outcome::kMismatch;
    r->reason = field(m, "detail", std::string("outputs differ from the reference"));
    r->verify.status = "failed";
    r->verify.detail = r->reason;
    return Status::OK();
  }
  r->correct = true;
  r->verify.status = "ok";
  r->verify.detail = "outputs match on " + std::to_string(field(report, "sets", 0)) +
                     " input sets (max abs diff " +
                     fixed(field(report, "max_abs_diff", 0.0), 6) + ")";
  return Status::OK();
}

Status Evaluator::baseline(Run& run, const std::string& impl, std::optional<double>* median_us,
                           nlohmann::json* data) {
  nlohmann::json settings = {{"schema", "cuda-agent.baseline/1"},
                             {"impl", impl},
                             {"task_sha256", run.record.task_sha256},
                             {"device", options_.device},
                             {"device_name", field(run.prepared, "device_name", "")},
                             {"torch", field(run.prepared, "torch", "")},
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
      if (field(*cached, "ok", false)) *median_us = field(*cached, "median_us", 0.0);
      return Status::OK();
    }
  }
  progress("profile: timing " + std::string(impl == "compile" ? "torch.compile" : "eager") +
           " (measured once, then cached)");
  nlohmann::json report;
  ProcessResult process;
  std::string err;
  Status s = run_harness(run, "profile.py", {"--impl", impl, "--task", run.task_file.string(),
                                             "--init", (run.dir.path() / "init.pt").string(),
                                             "--inputs", (run.dir.path() / "profile_inputs.pt").string(),
                                             "--init-seed", std::to_string(run.init_seed),
                                             "--device", options_.device,
                                             "--warmup", std::to_string(options_.warmup),
                                             "--iters", std::to_string(options_.iters),
                                             "--flush-mb", fixed(options_.flush_mb, 1)},
                         options_.trusted_timeout_s, false, &report, &process, &err);
  if (!s.ok()) return s;
  if (process.interrupted) return Status::Internal("interrupted");
  if (report.is_null()) {
    report = {{"ok", false}, {"error", process.describe() + ": " + last_line(err)}};
  }
  report["settings"] = settings;
  *data = report;
  (*data)["cached"] = false;
  if (field(report, "ok", false)) *median_us = field(report, "median_us", 0.0);
  // A baseline that failed is cached too: torch.compile failing on a task is a fact about it.
  return store_->put_baseline(key, report);
}

Status Evaluator::profile(Run& run, EvalResult* r) {
  auto start = Clock::now();
  nlohmann::json eager, compiled;
  Status s = baseline(run, "eager", &r->eager_us, &eager);
  if (!s.ok()) return s;
  if (!r->eager_us) {
    return Status::InvalidArgument("the task " + r->task_path + " could not be timed in eager mode: " +
                                   field(eager, "error", "unknown error"));
  }
  s = baseline(run, "compile", &r->compile_us, &compiled);
  if (!s.ok()) return s;
  r->profile.data["eager"] = eager;
  r->profile.data["compile"] = compiled;

  progress("profile: timing the candidate (" + std::to_string(options_.iters) + " iterations)");
  nlohmann::json report;
  ProcessResult process;
  std::string err;
  s = run_harness(run, "profile.py",
                  {"--impl", "candidate", "--task", run.task_file.string(), "--workspace",
                   run.workspace.string(), "--kernel-lib", run.library.string(), "--init",
                   (run.dir.path() / "init.pt").string(), "--inputs",
                   (run.dir.path() / "profile_inputs.pt").string(), "--init-seed",
                   std::to_string(run.init_seed), "--device", options_.device, "--warmup",
                   std::to_string(options_.warmup), "--iters", std::to_string(options_.iters),
                   "--flush-mb", fixed(options_.flush_mb, 1)},
                  options_.profile_timeout_s, true, &report, &process, &err);
  if (!s.ok()) return s;
  r->profile.data["candidate"] = report;
  r->profile.seconds = seconds_since(start);
  if (candidate_failed("profiling", process, report, err, r, &r->profile)) return Status::OK();
  double median = field(report, "median_us", 0.0);
  if (!(median > 0)) {
    r->outcome = Outcome::kRuntimeError;
    r->reason = "the candidate's profile report holds no valid time";
    r->profile.status = "failed";
    r->profile.detail = r->reason;
    return Status::OK();
  }
  r->candidate_us = median;
  r->profile.status = "ok";
  r->profile.detail = "median of " + std::to_string(options_.iters) + " timed calls" +
                      (field(eager, "cached", false) ? ", baselines from the run store" : "");
  if (!r->compile_us) {
    r->profile.detail += "; torch.compile failed on this task (" +
                         field(compiled, "error", std::string("unknown error")) +
                         "), so the reward is capped at 2";
  }
  return Status::OK();
}

Status Evaluator::evaluate(const fs::path& workspace, EvalResult* r) {
  *r = EvalResult();
  r->device = options_.device;
  r->stage = options_.stage;
  r->workspace = workspace_key(workspace);
  r->settings = {{"atol", options_.atol},         {"rtol", options_.rtol},
                 {"verify_sets", options_.verify_sets},
                 {"profile_sets", options_.profile_sets},
                 {"warmup", options_.warmup},     {"iters", options_.iters},
                 {"flush_mb", options_.flush_mb}, {"arch", options_.compile.arch}};

  Run run;
  if (options_.keep_run_dir) run.dir.keep();
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
  run.library = compiled.library;
  r->compile.status = compiled.cached ? "cached" : "ok";
  r->compile.detail = compiled.cached ? "unchanged sources: library reused"
                                      : std::to_string(compiled.objects_built) + " object(s) built, " +
                                            std::to_string(compiled.objects_cached) + " reused";
  progress("compile: " + r->compile.status + " (" + fixed(compiled.seconds, 2) + " s)");
  if (options_.stage == "compile") {
    r->reason = "kernels/ compiled";
    return finish();
  }

  auto prepare_start = Clock::now();
  progress("verify: drawing inputs and weights from a fresh secret seed");
  s = prepare(run, r);
  if (!s.ok()) return s;
  s = verify(run, r);
  if (!s.ok()) return s;
  r->verify.seconds = seconds_since(prepare_start);
  progress("verify: " + r->verify.status + " (" + fixed(r->verify.seconds, 2) + " s)");
  if (!r->passed() || options_.stage == "verify") {
    if (r->passed()) r->reason = r->verify.detail;
    return finish();
  }

  s = profile(run, r);
  if (!s.ok()) return s;
  progress("profile: " + r->profile.status + " (" + fixed(r->profile.seconds, 2) + " s)");
  if (r->passed()) {
    r->reason = "correct; " + r->profile.detail;
  }
  return finish();
}

}  // namespace cuda_agent
