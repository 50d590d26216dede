#include "eval/evaluator.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>
#include <thread>

#include "eval/harness.h"
#include "eval/reward.h"
#include "util/files.h"
#include "util/hash.h"
#include "util/paths.h"
#include "util/text.h"
#include "workspace/workspace.h"

namespace cuda_agent {

long long default_memory_limit_mb() {
  const long long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  const long long physical_mb = pages > 0 && page > 0 ? pages / 1024 * page / 1024 : 0;
  return std::max(32768LL, physical_mb * 6 / 10);
}

namespace fs = std::filesystem;

/// Everything one evaluation keeps between its stages.
struct Evaluator::Run {
  // First, so that it goes last: the next evaluation on the device starts once this one's files
  // (gigabytes of inputs and outputs at full size) are gone.
  FileLock device;
  fs::path workspace;
  WorkspaceRecord record;
  TempDir dir{"cuda-agent-run-"};
  fs::path trusted;  // dir/trusted: the task, inputs, weights; read-only to candidates
  std::vector<fs::path> readonly;    // what candidate processes may not write
  fs::path task_file;                // the recorded task text, in trusted/
  fs::path library;                  // the compiled kernels
  unsigned long long seed = 0;       // secret: never given to a candidate process
  unsigned long long init_seed = 0;  // weights; the candidate builds ModelNew with it
  nlohmann::json prepared;           // prepare.py's report
  std::unique_ptr<Harness> harness;  // starts the harness processes, files in dir
  nlohmann::json timings = nlohmann::json::array();  // one entry per harness process
};

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kSavedTimedCalls = 2;              // timed calls kept in full for the recheck
constexpr double kCpuBandwidthBytesPerS = 1e12;  // no CPU writes memory faster
constexpr double kCudaCallFloorUs = 1.0;         // a launch and a device synchronize
constexpr double kCpuCallFloorUs = 0.05;         // a Python call
constexpr double kClockSlackUs = 20.0;           // event vs host clock on one call
// The candidate's overhead may be this many times eager's, plus the slack, plus half its reported
// time, before time hidden from its reported figures is assumed: generous, since the eager figure
// may come from the cache, measured on a machine less loaded than now.
constexpr double kOverheadFactor = 3.0;
constexpr double kOverheadSlackS = 0.25;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

unsigned long long draw_seed() {
  std::random_device device;
  unsigned long long seed = (static_cast<unsigned long long>(device()) << 32) | device();
  return seed & ((1ULL << 40) - 1);  // room for seed + set offsets below torch's 2^64 limit
}

std::string secret_hex() {
  std::random_device device;
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%08x%08x", device(), device());
  return buffer;
}

void add_check(EvalResult* r, std::string name, std::string status, std::string detail) {
  r->checks.push_back({std::move(name), std::move(status), std::move(detail)});
}

/// A violation found by the profile stage's check `check`: the candidate is refused for it.
void refuse_in_profile(EvalResult* r, const std::string& rule, const std::string& check,
                       const std::string& why) {
  r->violations.push_back({rule, why});
  r->outcome = Outcome::kViolation;
  r->reason = why;
  r->profile.status = "failed";
  r->profile.detail = why;
  add_check(r, check, "failed", why);
}

/// Linear interpolation between the closest ranks of an ascending list (as timing.py does).
double percentile(const std::vector<double>& ordered, double q) {
  double position = (ordered.size() - 1) * q;
  size_t low = static_cast<size_t>(position);
  size_t high = std::min(low + 1, ordered.size() - 1);
  return ordered[low] + (ordered[high] - ordered[low]) * (position - low);
}

/// The raw per-call times of a timing report, when there are exactly `iters` finite,
/// non-negative ones in times_us and in host_us.
bool read_times(const nlohmann::json& report, int iters, std::vector<double>* times,
                std::vector<double>* host) {
  for (auto [key, out] : {std::pair{"times_us", times}, std::pair{"host_us", host}}) {
    const auto& list = report_field(report, key, nlohmann::json::array());
    if (static_cast<int>(list.size()) != iters) return false;
    out->clear();
    for (const auto& value : list) {
      if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < 0)
        return false;
      out->push_back(value.get<double>());
    }
  }
  return true;
}

/// Statistics of the timed calls, computed here rather than taken from the (possibly
/// candidate-written) report: median, p10, p90, min, max, sum.
void put_statistics(const std::vector<double>& times, nlohmann::json* report) {
  std::vector<double> ordered = times;
  std::sort(ordered.begin(), ordered.end());
  (*report)["median_us"] = percentile(ordered, 0.5);
  (*report)["p10_us"] = percentile(ordered, 0.1);
  (*report)["p90_us"] = percentile(ordered, 0.9);
  (*report)["min_us"] = ordered.front();
  (*report)["max_us"] = ordered.back();
  (*report)["sum_us"] = std::accumulate(times.begin(), times.end(), 0.0);
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

HarnessCall Evaluator::make_call(Run& run, const std::string& script,
                                 const std::vector<std::string>& args, double timeout_s,
                                 bool candidate, bool gated) {
  if (!candidate) return run.harness->call(script, args, timeout_s, run.dir.path(), {}, gated);
  HarnessCall call = run.harness->call(script, args, timeout_s, run.workspace,
                                       {{"CUDA_AGENT_KERNEL_LIB", run.library.string()}}, gated);
  // B6: the harness, the trusted inputs, the store and the cache are read-only mounts for the
  // candidate's processes, by construction. Where the kernel offers no namespaces the process
  // still runs, and the result says the paths were left writable.
  call.spec.readonly_paths = run.readonly;
  // From the candidates' own fork server, never the trusted one: the memory its children are
  // forked from has held no trusted process's request.
  if (!call.spec.fork_server.empty()) call.spec.fork_server.push_back(kCandidatesFlag);
  // Where its outputs and report go, also when the store's folder holds the temporary directory.
  call.spec.writable_paths = {run.dir.path()};
  call.spec.require_readonly = readonly_isolation_available();
  return call;
}

std::unique_ptr<HarnessStep> Evaluator::launch(Run& run, const std::string& script,
                                               const std::vector<std::string>& args,
                                               double timeout_s, bool candidate, bool gated) {
  return std::make_unique<HarnessStep>(run.harness.get(),
                                       make_call(run, script, args, timeout_s, candidate, gated));
}

void Evaluator::discard(const fs::path& bundle) const {
  if (options_.keep_run_dir) return;
  std::error_code ignored;  // the folder goes at the end anyway
  fs::remove(bundle, ignored);
  // The bundle's large tensors, written apart from it (harness/common.py's Spill).
  fs::remove_all(fs::path(bundle.string() + ".raw"), ignored);
}

Status Evaluator::source_rules(Run& run, HarnessStep& rules, EvalResult* r) {
  HarnessResult h = rules.go();
  Status s = record(run, rules.call(), h);
  if (!s.ok()) return s;
  if (!report_field(h.report, "ok", false)) {
    return Status::Internal("the source rule checker failed: " +
                            report_field(h.report, "error", h.process.describe()));
  }
  int violations = 0;
  for (const auto& f : report_field(h.report, "findings", nlohmann::json::array())) {
    Violation v{report_field(f, "rule", "unknown"), report_field(f, "detail", ""),
                report_field(f, "file", ""), report_field(f, "line", 0)};
    bool violation = report_field(f, "severity", "warning") == "violation";
    if (violation && options_.enforce_source_rules) {
      r->violations.push_back(std::move(v));
      ++violations;
    } else {
      r->warnings.push_back(std::move(v));
    }
  }
  size_t files = report_field(h.report, "files", nlohmann::json::array()).size();
  if (violations > 0) {
    r->outcome = Outcome::kViolation;
    const Violation& first = r->violations.front();
    r->reason = first.file + ":" + std::to_string(first.line) + ": " + first.detail;
    add_check(r, "source rules", "failed",
              std::to_string(violations) + " rule(s) broken in " + std::to_string(files) +
                  " file(s); no candidate code was run");
  } else {
    add_check(r, "source rules", r->warnings.empty() ? "passed" : "warning",
              std::to_string(files) + " file(s) read, " + std::to_string(r->warnings.size()) +
                  " warning(s)" + (options_.enforce_source_rules ? "" : " (--source-rules warn)"));
  }
  return Status::OK();
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
  if (options_.shrink > 1)
    r->settings["task_sizes"] = report_field(h.report, "sizes", nlohmann::json::object());
  r->device_name = report_field(h.report, "device_name", "");
  r->torch_version = report_field(h.report, "torch", "");
  const auto& extra = report_field(h.report, "extra_sets", nlohmann::json::object());
  std::string dropped;
  for (const auto& d : report_field(extra, "dropped", nlohmann::json::array()))
    dropped += "; " + report_field(d, "set", "") + " set dropped: " + report_field(d, "reason", "");
  add_check(r, "secret inputs", "passed",
            std::to_string(report_field(h.report, "verify_sets", 0)) +
                " verify sets drawn from a secret seed, " +
                std::to_string(report_field(extra, "kept", 0)) +
                " of them shifted or spiked (S5, S6)" + dropped);
  return Status::OK();
}

Status Evaluator::verify(Run& run, HarnessStep& candidate, HarnessStep& check, EvalResult* r) {
  progress("verify: running the candidate on " +
           std::to_string(report_field(run.prepared, "verify_sets", options_.verify_sets)) +
           " fresh input sets");
  HarnessResult h = candidate.go();
  Status s = record(run, candidate.call(), h);
  if (!s.ok()) return s;
  r->sandbox["network_isolated"] = h.process.network_isolated;
  r->sandbox["readonly_enforced"] = h.process.readonly_enforced;
  add_check(r, "sandbox", h.process.readonly_enforced ? "passed" : "warning",
            std::string(h.process.network_isolated ? "no network" : "network reachable") +
                (h.process.readonly_enforced
                     ? "; harness, trusted inputs, store and cache mounted read-only"
                     : "; read-only mounts unavailable here: " + h.process.error));
  r->verify.data["candidate"] = h.report;
  if (candidate_failed("verification", h.process, h.report, h.output, r, &r->verify)) {
    add_check(r, "candidate run (guard, watch)", "failed", r->reason);
    return Status::OK();
  }
  add_check(r, "candidate run (guard, watch)", "passed",
            "no torch compute in forward, nothing patched, precision pinned, no thread left "
            "working, outputs exactly torch.Tensor; library ops: " +
                report_field(h.report, "library_ops", nlohmann::json::array()).dump());

  // The comparison runs in a trusted process that builds the reference only now.
  h = check.go();
  s = record(run, check.call(), h);
  if (!s.ok()) return s;
  // The largest files of the run: the candidate's outputs, and the verify sets where a task's
  // get_inputs() does not repeat itself (profiling draws, or reads, its own sets).
  discard(run.trusted / "verify_inputs.pt");
  discard(run.dir.path() / "candidate_out.pt");
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
    if (kind != "candidate_output") {
      // The checker itself failed (out of device memory, say): no verdict on the candidate.
      return Status::Internal("the trusted checker failed: " + report_field(report, "error", ""));
    }
    r->outcome = Outcome::kRuntimeError;
    r->reason = "the candidate's outputs could not be read: " + report_field(report, "error", "");
    r->verify.status = "failed";
    r->verify.detail = r->reason;
    add_check(r, "outputs vs reference", "failed", r->reason);
    return Status::OK();
  }
  auto fail = [&](Outcome outcome, const std::string& check_name, const std::string& detail) {
    r->outcome = outcome;
    r->reason = detail;
    r->verify.status = "failed";
    r->verify.detail = detail;
    add_check(r, check_name, "failed", detail);
    return Status::OK();
  };
  if (const auto& d = report_field(report, "degenerate", nlohmann::json::object()); !d.empty()) {
    return fail(Outcome::kDegenerateTask, "task not degenerate (S4, S13)",
                "the task is degenerate: " + report_field(d, "detail", std::string()));
  }
  add_check(r, "task not degenerate (S4, S13)", "passed",
            "no output is a constant, independent of the inputs, or one of them");
  if (report.contains("inputs_modified") && report["inputs_modified"].is_object()) {
    const auto& m = report["inputs_modified"];
    std::string detail = "forward modified input " + std::to_string(report_field(m, "input", 0)) +
                         " of input set " + std::to_string(report_field(m, "set", 0)) +
                         "; inputs must be left unchanged";
    r->violations.push_back({"inputs_modified", detail});
    return fail(Outcome::kViolation, "inputs unchanged (S3)", detail);
  }
  add_check(r, "inputs unchanged (S3)", "passed", "every input equal to its copy after the call");
  if (!report_field(report, "correct", false)) {
    const auto& m = report_field(report, "mismatch", nlohmann::json::object());
    return fail(Outcome::kMismatch, "outputs vs reference",
                report_field(m, "detail", std::string("outputs differ from the reference")));
  }
  r->correct = true;
  r->verify.status = "ok";
  r->verify.detail = "outputs match on " + std::to_string(report_field(report, "sets", 0)) +
                     " input sets and a fresh rerun (max abs diff " +
                     fixed(report_field(report, "max_abs_diff", 0.0), 6) + ")";
  add_check(r, "outputs vs reference", "passed", r->verify.detail);
  return Status::OK();
}

Status Evaluator::time_baseline(Run& run, const std::string& impl,
                                std::unique_ptr<HarnessStep> started, nlohmann::json* out,
                                std::optional<double>* median_us) {
  // The same two gates as the candidate's timing, so the host clock sees the same overhead.
  if (!started)
    started =
        launch(run, "timing.py", timing_args(run, impl), options_.trusted_timeout_s, false, true);
  HarnessResult h = started->go_timed(secret_hex());
  Status s = record(run, started->call(), h);
  if (!s.ok()) return s;
  // Written like the candidate's, so that the clock sees the same work; only the candidate's
  // timed calls are recomputed.
  discard(run.dir.path() / ("timed_" + impl + ".pt"));
  if (h.process.interrupted) return Status::Internal("interrupted");
  nlohmann::json report = h.report;
  if (report.is_null()) {
    report = {{"ok", false}, {"error", h.process.describe() + ": " + last_line(h.output)}};
  }
  std::vector<double> times, host;
  if (report_field(report, "ok", false)) {
    if (!read_times(report, options_.iters, &times, &host)) {
      report = {{"ok", false}, {"error", "timing.py reported no valid times"}};
    } else {
      put_statistics(times, &report);
      // What the harness spends around the calls (inputs, flush, checks, fingerprints, exit),
      // measured on this process's clock: the yardstick for the candidate's (T5, T6).
      report["host_overhead_s"] = h.timed_host_s - report["sum_us"].get<double>() / 1e6;
      *median_us = report["median_us"].get<double>();
    }
  }
  report.erase("times_us");
  report.erase("host_us");
  *out = std::move(report);
  return Status::OK();
}

Status Evaluator::baseline(Run& run, const std::string& impl, std::unique_ptr<HarnessStep> started,
                           std::optional<double>* median_us, nlohmann::json* data) {
  nlohmann::json settings = {{"schema", "cuda-agent.baseline/3"},
                             {"impl", impl},
                             {"task_sha256", run.record.task_sha256},
                             {"device", options_.device},
                             {"device_name", report_field(run.prepared, "device_name", "")},
                             {"torch", report_field(run.prepared, "torch", "")},
                             {"warmup", options_.warmup},
                             {"iters", options_.iters},
                             {"flush_mb", options_.flush_mb},
                             {"save_calls", kSavedTimedCalls},
                             {"profile_sets", options_.profile_sets},
                             {"shrink", options_.shrink}};
  if (!options_.baseline_scope.empty()) settings["scope"] = options_.baseline_scope;
  std::string key = sha256_hex(settings.dump());
  Status s;
  if (options_.use_baseline_cache) {
    std::optional<nlohmann::json> cached;
    s = store_->get_baseline(key, &cached);
    if (!s.ok()) return s;
    if (cached) {
      if (started) started->abort();
      *data = *cached;
      (*data)["cached"] = true;
      if (report_field(*cached, "ok", false)) *median_us = report_field(*cached, "median_us", 0.0);
      return Status::OK();
    }
  }
  progress("profile: timing " + std::string(impl == "compile" ? "torch.compile" : "eager") +
           " (measured once, then cached)");
  nlohmann::json report;
  s = time_baseline(run, impl, std::move(started), &report, median_us);
  if (!s.ok()) return s;
  report["settings"] = settings;
  *data = report;
  (*data)["cached"] = false;
  // A baseline that failed is cached too: torch.compile failing on a task is a fact about it.
  return store_->put_baseline(key, report);
}

bool Evaluator::timing_consistent(const Run& run, const HarnessResult& h, EvalResult* r) {
  auto violate = [&](const std::string& rule, const std::string& check, const std::string& why) {
    refuse_in_profile(r, rule, check, why);
    return false;
  };
  std::vector<double> times, host;
  if (!read_times(h.report, options_.iters, &times, &host) || h.timed_host_s < 0) {
    return violate("report_invalid", "timing report well-formed (T6)",
                   "the candidate's timing process did not report " +
                       std::to_string(options_.iters) +
                       " timed calls as the protocol asks (a forged or truncated report)");
  }
  add_check(r, "timing report well-formed (T6)", "passed",
            std::to_string(times.size()) + " raw times; statistics computed by the evaluator");

  // T9: no call can be faster than writing its outputs once at the memory's peak bandwidth
  // (halved, for headroom), nor than a launch and a device synchronize.
  double bandwidth = report_field(run.prepared, "peak_bandwidth", 0.0);
  if (!(bandwidth > 0)) bandwidth = kCpuBandwidthBytesPerS;
  double floor_us = report_field(run.prepared, "output_bytes", 0.0) / (2 * bandwidth) * 1e6 +
                    (options_.device == "cuda" ? kCudaCallFloorUs : kCpuCallFloorUs);
  auto fastest = std::min_element(times.begin(), times.end());
  if (*fastest < floor_us) {
    return violate("time_below_floor", "time above physical floor (T9)",
                   "timed call " + std::to_string(fastest - times.begin()) + " took " +
                       fixed(*fastest, 3) + " us, below the physical floor of " +
                       fixed(floor_us, 3) + " us for its outputs");
  }
  add_check(r, "time above physical floor (T9)", "passed",
            "fastest call " + fixed(*fastest, 2) + " us >= floor " + fixed(floor_us, 3) + " us");

  // T5: device events against the host clock of the same calls (cuda; on the cpu they are one).
  int behind = 0;
  for (size_t i = 0; i < times.size(); ++i)
    if (times[i] < 0.5 * host[i] - kClockSlackUs) ++behind;
  if (behind * 10 > static_cast<int>(times.size())) {
    return violate("timing_inconsistent", "event time vs host time (T1, T5)",
                   std::to_string(behind) + " of " + std::to_string(times.size()) +
                       " timed calls report less than half the host time they took");
  }
  add_check(r, "event time vs host time (T1, T5)", "passed",
            "every call's event time agrees with its host time");

  put_statistics(times, &r->profile.data["candidate"]);
  r->profile.data["candidate"]["timed_host_s"] = h.timed_host_s;
  r->profile.data["candidate"]["host_overhead_s"] =
      h.timed_host_s - r->profile.data["candidate"]["sum_us"].get<double>() / 1e6;
  return true;
}

std::string Evaluator::overhead_excess(double eager_overhead_s, const EvalResult& r) const {
  const auto& data = r.profile.data.at("candidate");
  double sum_s = data.at("sum_us").get<double>() / 1e6;
  double overhead_s = data.at("host_overhead_s").get<double>();
  double allowed =
      kOverheadFactor * std::max(0.0, eager_overhead_s) + kOverheadSlackS + 0.5 * sum_s;
  if (overhead_s <= allowed) return "";
  return "the timed calls took " + fixed(data.at("timed_host_s").get<double>(), 3) +
         " s on the evaluator's clock but report " + fixed(sum_s, 3) + " s; the " +
         fixed(overhead_s, 3) + " s around them exceed the " + fixed(allowed, 3) +
         " s the harness needs";
}

std::string Evaluator::overhead_detail(double eager_overhead_s, const EvalResult& r) const {
  const auto& data = r.profile.data.at("candidate");
  return fixed(data.at("timed_host_s").get<double>(), 3) + " s on the evaluator's clock for " +
         fixed(data.at("sum_us").get<double>() / 1e6, 4) + " s reported (overhead " +
         fixed(data.at("host_overhead_s").get<double>(), 3) + " s, eager's " +
         fixed(eager_overhead_s, 3) + " s)";
}

Status Evaluator::time_candidate(Run& run, HarnessStep& timing, EvalResult* r, bool* timed) {
  *timed = false;
  HarnessResult h = timing.go_timed(secret_hex());
  Status s = record(run, timing.call(), h);
  if (!s.ok()) return s;
  nlohmann::json report = h.report;
  // Statistics come from the raw times, computed here: none of the candidate's own stay.
  for (const char* key : {"median_us", "p10_us", "p90_us", "min_us", "max_us", "sum_us"})
    report.erase(key);
  r->profile.data["candidate"] = report;
  if (candidate_failed("profiling", h.process, h.report, h.output, r, &r->profile)) {
    add_check(r, "candidate timing (guard, watch)", "failed", r->reason);
    return Status::OK();
  }
  add_check(
      r, "candidate timing (guard, watch)", "passed",
      std::string("every timed call guarded and followed by the process checks") +
          (options_.device == "cuda" ? "; persisting L2 lines reset and the L2 flushed before each"
                                     : "; the caches flushed before each"));
  *timed = timing_consistent(run, h, r);
  return Status::OK();
}

Status Evaluator::recheck_timed(Run& run, HarnessStep& recheck, EvalResult* r) {
  progress("profile: recomputing the timed calls with the reference");
  HarnessResult h = recheck.go();
  Status s = record(run, recheck.call(), h);
  if (!s.ok()) return s;
  r->profile.data["recheck"] = h.report;
  if (h.process.interrupted) {
    r->outcome = Outcome::kInterrupted;
    r->reason = "interrupted during the recheck of the timed calls";
    return Status::OK();
  }
  if (h.report.is_null()) {
    return Status::Internal("the trusted recheck " + h.process.describe() + ": " +
                            last_line(h.output));
  }
  std::string rule, why;
  if (!report_field(h.report, "ok", false)) {
    const std::string kind = report_field(h.report, "error_kind", "");
    if (kind == "task") {
      return Status::InvalidArgument("the task " + r->task_path +
                                     " does not run: " + report_field(h.report, "error", ""));
    }
    if (kind != "candidate_output") {
      // The recheck itself failed (out of device memory, say): no verdict on the candidate.
      return Status::Internal("the trusted recheck of the timed calls failed: " +
                              report_field(h.report, "error", ""));
    }
    rule = "report_invalid";
    why = "the timed calls' outputs could not be checked: " + report_field(h.report, "error", "");
  } else {
    const auto& timed = report_field(h.report, "timed", nlohmann::json::object());
    const auto& mismatch = report_field(timed, "mismatch", nlohmann::json::object());
    if (!mismatch.empty()) {
      rule = "timed_output_mismatch";
      why = report_field(mismatch, "detail", std::string("a timed call's output is wrong"));
    }
  }
  if (!rule.empty()) {
    refuse_in_profile(r, rule, "timed outputs recomputed (T7, T8, T11)", why);
    return Status::OK();
  }
  add_check(r, "timed outputs recomputed (T7, T8, T11)", "passed",
            "all " + std::to_string(options_.iters) +
                " timed calls ran on fresh secret inputs; their fingerprints and " +
                std::to_string(kSavedTimedCalls) + " full outputs match the reference");
  return Status::OK();
}

Status Evaluator::profile(Run& run, Steps& steps, EvalResult* r) {
  auto start = Clock::now();
  nlohmann::json eager, compiled;
  Status s = baseline(run, "eager", std::move(steps.eager), &r->eager_us, &eager);
  if (!s.ok()) return s;
  if (!r->eager_us) {
    return Status::InvalidArgument(
        "the task " + r->task_path +
        " could not be timed in eager mode: " + report_field(eager, "error", "unknown error"));
  }
  s = baseline(run, "compile", std::move(steps.compile), &r->compile_us, &compiled);
  if (!s.ok()) return s;
  r->profile.data["eager"] = eager;
  r->profile.data["compile"] = compiled;

  progress("profile: timing the candidate (" + std::to_string(options_.iters) + " iterations)");
  bool timed = false;
  s = time_candidate(run, *steps.timing, r, &timed);
  r->profile.seconds = seconds_since(start);
  if (!s.ok() || !timed) return s;
  constexpr const char* kOverheadCheck = "host clock vs reported times (T5, T6)";
  const double eager_overhead = report_field(eager, "host_overhead_s", -1.0);
  if (!eager.contains("host_overhead_s") || !eager["host_overhead_s"].is_number()) {
    add_check(r, kOverheadCheck, "skipped", "no eager overhead to compare with");
  } else if (std::string excess = overhead_excess(eager_overhead, *r); !excess.empty()) {
    // Time hidden from the reported figures shows here, but so does a machine busier now than
    // when eager was timed (seconds or days ago): the harness's own work around the calls slows
    // with it. Before the candidate is refused, eager and the candidate are timed again, one
    // right after the other, and that pair decides; the first timing's calls are dropped whole,
    // so a candidate that hides time on some runs gains nothing from the one that passes.
    add_check(r, kOverheadCheck, "retried",
              excess + " (eager's " + fixed(eager_overhead, 3) +
                  " s); eager and the candidate timed again, back to back");
    nlohmann::json first = r->profile.data["candidate"];
    first.erase("times_us");
    first.erase("host_us");
    progress(
        "profile: more time around the timed calls than eager's; timing eager and the "
        "candidate again, back to back");
    discard(run.dir.path() / "timed_candidate.pt");
    // Both start up (seconds of imports) while eager is timed; neither is released before.
    steps.timing = launch(run, "timing.py", timing_args(run, "candidate"),
                          options_.profile_timeout_s, true, true);
    steps.recheck = launch(run, "check.py", recheck_args(run, steps.timing->secret_path()),
                           options_.trusted_timeout_s, false, true);
    nlohmann::json again;
    std::optional<double> again_us;
    s = time_baseline(run, "eager", nullptr, &again, &again_us);
    if (!s.ok()) return s;
    if (!again_us) {
      return Status::Internal("eager could not be timed again: " +
                              report_field(again, "error", std::string("unknown error")));
    }
    r->profile.data["eager_again"] = again;
    s = time_candidate(run, *steps.timing, r, &timed);
    r->profile.seconds = seconds_since(start);
    r->profile.data["first_timing"] = first;
    if (!s.ok() || !timed) return s;
    double again_overhead = again["host_overhead_s"].get<double>();
    excess = overhead_excess(again_overhead, *r);
    if (!excess.empty()) {
      refuse_in_profile(
          r, "timing_inconsistent", kOverheadCheck,
          excess + " (eager's, timed just before, " + fixed(again_overhead, 3) + " s)");
      return Status::OK();
    }
    add_check(r, kOverheadCheck, "passed", overhead_detail(again_overhead, *r));
  } else {
    add_check(r, kOverheadCheck, "passed", overhead_detail(eager_overhead, *r));
  }
  s = recheck_timed(run, *steps.recheck, r);
  r->profile.seconds = seconds_since(start);
  if (!s.ok() || !r->passed()) return s;
  r->candidate_us = r->profile.data["candidate"]["median_us"].get<double>();
  r->profile.status = "ok";
  r->profile.detail =
      "median of " + std::to_string(options_.iters) + " timed calls on fresh inputs" +
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
  std::vector<std::string> args = {
      "--impl",       impl,
      "--task",       run.task_file.string(),
      "--init",       (run.trusted / "init.pt").string(),
      "--inputs",     (run.trusted / "inputs.json").string(),
      "--init-seed",  std::to_string(run.init_seed),
      "--device",     options_.device,
      "--warmup",     std::to_string(options_.warmup),
      "--iters",      std::to_string(options_.iters),
      "--flush-mb",   fixed(options_.flush_mb, 1),
      "--save-calls", std::to_string(kSavedTimedCalls),
      "--out",        (run.dir.path() / ("timed_" + impl + ".pt")).string(),
      "--shrink",     std::to_string(options_.shrink)};
  if (impl == "candidate") {
    args.insert(args.end(), {"--workspace", run.workspace.string(), "--kernel-lib",
                             run.library.string(), "--precision", options_.precision});
  }
  return args;
}

std::vector<std::string> Evaluator::recheck_args(const Run& run,
                                                 const fs::path& secret_path) const {
  return {"--timed",
          "--task",
          run.task_file.string(),
          "--init",
          (run.trusted / "init.pt").string(),
          "--inputs",
          (run.trusted / "inputs.json").string(),
          "--candidate-out",
          (run.dir.path() / "timed_candidate.pt").string(),
          "--secret-file",
          secret_path.string(),
          "--iters",
          std::to_string(options_.iters),
          "--save-calls",
          std::to_string(kSavedTimedCalls),
          "--init-seed",
          std::to_string(run.init_seed),
          "--device",
          options_.device,
          "--atol",
          fixed(options_.atol, 8),
          "--rtol",
          fixed(options_.rtol, 8),
          "--shrink",
          std::to_string(options_.shrink)};
}

void Evaluator::wait_for_startups(const Steps& steps) {
  for (const auto* step : {&steps.rules, &steps.prepare, &steps.candidate, &steps.check,
                           &steps.timing, &steps.recheck, &steps.eager, &steps.compile}) {
    while (*step && (*step)->starting()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void Evaluator::start_steps(Run& run, Steps* steps) {
  run.seed = draw_seed();
  run.init_seed = draw_seed();
  // Known before the compile ends: a link to the built library is made here once it exists.
  run.library = run.dir.path() / "libkernels.so";
  const std::string init = (run.trusted / "init.pt").string();
  // prepare.py's recipe: every later process draws the input sets from it again, on the device.
  const std::string inputs = (run.trusted / "inputs.json").string();
  const std::string out = (run.dir.path() / "candidate_out.pt").string();
  const std::string seed = std::to_string(run.init_seed);
  const std::string atol = fixed(options_.atol, 8), rtol = fixed(options_.rtol, 8);
  steps->rules = launch(run, "rules.py", {"--workspace", run.workspace.string()},
                        options_.trusted_timeout_s, false, false);
  steps->prepare = launch(run, "prepare.py",
                          {"--task", run.task_file.string(), "--device", options_.device, "--seed",
                           std::to_string(run.seed), "--init-seed", seed, "--verify-sets",
                           std::to_string(options_.verify_sets), "--profile-sets",
                           std::to_string(options_.profile_sets), "--out", run.trusted.string(),
                           "--shrink", std::to_string(options_.shrink)},
                          options_.trusted_timeout_s, false, !options_.device_lock.empty());
  steps->candidate =
      launch(run, "run_candidate.py", {"--workspace",  run.workspace.string(),
                                       "--kernel-lib", run.library.string(),
                                       "--task",       run.task_file.string(),
                                       "--init",       init,
                                       "--inputs",     inputs,
                                       "--init-seed",  seed,
                                       "--device",     options_.device,
                                       "--out",        out,
                                       "--precision",  options_.precision,
                                       "--shrink",     std::to_string(options_.shrink)},
             options_.verify_timeout_s, true, true);
  steps->check = launch(run, "check.py", {"--task",          run.task_file.string(),
                                          "--init",          init,
                                          "--inputs",        inputs,
                                          "--candidate-out", out,
                                          "--init-seed",     seed,
                                          "--device",        options_.device,
                                          "--atol",          atol,
                                          "--rtol",          rtol,
                                          "--seeded-sets",   std::to_string(options_.verify_sets),
                                          "--shrink",        std::to_string(options_.shrink)},
                        options_.trusted_timeout_s, false, true);
  if (options_.stage != "verify") {
    steps->timing = launch(run, "timing.py", timing_args(run, "candidate"),
                           options_.profile_timeout_s, true, true);
    steps->recheck = launch(run, "check.py", recheck_args(run, steps->timing->secret_path()),
                            options_.trusted_timeout_s, false, true);
    for (auto [impl, step] :
         {std::pair{"eager", &steps->eager}, std::pair{"compile", &steps->compile}}) {
      // A store that cannot say starts nothing early: the baseline is timed as it always was.
      bool timed_before = false;
      if (options_.use_baseline_cache &&
          (!store_->has_baseline(run.record.task_sha256, impl, options_.device, &timed_before)
                .ok() ||
           timed_before))
        continue;
      *step =
          launch(run, "timing.py", timing_args(run, impl), options_.trusted_timeout_s, false, true);
    }
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
                 {"arch", options_.compile.arch},
                 {"shrink", options_.shrink},
                 {"precision", options_.precision}};

  Run run;
  if (options_.keep_run_dir) run.dir.keep();
  run.trusted = run.dir.path() / "trusted";
  fs::create_directories(run.trusted / "task");
  // Before its release a gated process waits for the trusted steps, torch.compile included.
  run.harness = std::make_unique<Harness>(
      HarnessOptions{options_.python, options_.harness_dir, options_.memory_limit_mb,
                     3 * options_.trusted_timeout_s + options_.verify_timeout_s,
                     options_.bytecode_dir},
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
  add_check(r, "workspace checksums", r->passed() ? "passed" : "failed",
            r->passed() ? "model.py, SKILL.md and utils/ are as recorded at init" : r->reason);
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
        add_check(r, "workspace checksums after the run", "failed", r->reason);
      } else {
        add_check(r, "workspace checksums after the run", "passed",
                  "the candidate's processes left the infrastructure as it was");
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
  run.task_file = run.trusted / "task" / (r->task_id + ".py");
  s = write_file_atomic(run.task_file, run.record.task_source);
  if (!s.ok()) return s;
  run.readonly = options_.protected_paths;
  run.readonly.insert(
      run.readonly.end(),
      {options_.harness_dir, run.trusted, run.workspace / "utils", run.workspace / "model.py",
       run.workspace / "SKILL.md", run.workspace / ".cuda-agent"});

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
  if (!compiled.ok && interrupt_requested().load()) {
    // The compiler was stopped with the evaluation: no compile error of the candidate's.
    r->outcome = Outcome::kInterrupted;
    r->reason = "interrupted during the compile";
    r->compile.status = "interrupted";
    r->compile.detail = r->reason;
    return finish();
  }
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

  s = source_rules(run, *steps.rules, r);
  if (!s.ok()) return s;
  if (!r->passed()) return finish();

  if (!options_.device_lock.empty()) {
    s = FileLock::Acquire(options_.device_lock, &run.device, [this](double waited_s) {
      if (waited_s < 1)
        progress("verify: waiting for the device (" + options_.device_lock.string() + ")");
      return !interrupt_requested().load();
    });
    if (!s.ok()) return s;
  }
  auto prepare_start = Clock::now();
  progress("verify: drawing inputs and weights from a fresh secret seed");
  s = prepare(run, *steps.prepare, r);
  if (!s.ok()) return s;
  // Candidate code runs only once the other processes have imported torch: on a machine with
  // few cores those imports take the CPU from the calls being verified and timed, and delay a
  // kernel's OpenMP threads on their way back to sleep until after forward has returned, where
  // they look like work left running (T2).
  wait_for_startups(steps);
  s = verify(run, *steps.candidate, *steps.check, r);
  if (!s.ok()) return s;
  r->verify.seconds = seconds_since(prepare_start);
  progress("verify: " + r->verify.status + " (" + fixed(r->verify.seconds, 2) + " s)");
  if (!r->passed() || options_.stage == "verify") {
    if (r->passed()) r->reason = r->verify.detail;
    return finish();
  }

  s = profile(run, steps, r);
  if (!s.ok()) return s;
  progress("profile: " + r->profile.status + " (" + fixed(r->profile.seconds, 2) + " s)");
  if (r->passed()) {
    r->reason = "correct; " + r->profile.detail;
  }
  return finish();
}

void use_run_folders(EvalOptions* options, const fs::path& cache_dir, const fs::path& store_path) {
  options->harness_dir = harness_dir();
  options->compile.cache_dir = cache_dir;
  std::error_code ec;
  fs::create_directories(cache_dir, ec);
  options->protected_paths = {store_path.parent_path(), cache_dir};
  options->bytecode_dir = cache_dir / "bytecode";
}

}  // namespace cuda_agent
