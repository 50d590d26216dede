/// The evaluator's side of harness/PROTOCOL.md: a harness script started as a sandboxed process,
/// at once or gated (started early, waiting for its release), and the report it leaves behind.
#pragma once

#include <filesystem>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "sandbox/process_runner.h"

namespace cuda_agent {

struct HarnessCall {
  std::string script;  // e.g. "check.py"
  ProcessSpec spec;
  std::filesystem::path report_path;
  std::filesystem::path gate;  // empty: starts at once; else waits for a release written here
};

struct HarnessResult {
  ProcessResult process;
  nlohmann::json report;  // null when the process wrote none
  std::string output;     // stdout and stderr
  /// go_timed(): seconds from revealing the secret to the process's end, on the evaluator's
  /// clock (the candidate cannot reach it); negative when the process never asked for it.
  double timed_host_s = -1;
};

struct HarnessOptions {
  std::string python = "python3";
  std::filesystem::path harness_dir;  // where the scripts are
  long long memory_limit_mb = 0;
  double wait_timeout_s = 0;           // how long a gated process may wait for its release
  std::filesystem::path bytecode_dir;  // Python's pycache_prefix; empty: run_dir/trusted/pycache
};

/// A harness script as every caller starts one: `python -E -s [-X pycache_prefix=PYCACHE]
/// harness_dir/SCRIPT` (no PYTHON* variables, no user site, bytecode only where the caller keeps
/// it; none given: Python's own __pycache__ folders), OMP_WAIT_POLICY=PASSIVE, and the fork
/// server of that interpreter (ProcessSpec::fork_server), which trusted scripts start from. A
/// candidate's process must name the candidates' server instead (its argv ends in
/// kCandidatesFlag). The caller adds the arguments.
ProcessSpec harness_process(const std::string& python, const std::filesystem::path& harness_dir,
                            const std::filesystem::path& pycache, const std::string& script);

/// Builds and runs the harness processes of one evaluation, whose files go to run_dir.
class Harness {
 public:
  Harness(HarnessOptions options, ProcessRunner* runner, std::filesystem::path run_dir)
      : options_(std::move(options)), runner_(runner), run_dir_(std::move(run_dir)) {}

  /// env: variables of this call alone, which its script reads once it runs (not while it
  /// imports): a fork server serves calls that differ in them (ProcessSpec::env_after_imports).
  HarnessCall call(const std::string& script, const std::vector<std::string>& args,
                   double timeout_s, const std::filesystem::path& cwd,
                   const std::map<std::string, std::string>& env, bool gated);
  /// Runs the process to its end (thread-safe) and reads what it left.
  HarnessResult run(const HarnessCall& call) const;

  const HarnessOptions& options() const { return options_; }

 private:
  HarnessOptions options_;
  ProcessRunner* runner_;
  std::filesystem::path run_dir_;
  int processes_ = 0;  // numbers the report and log files
};

/// A harness process running in the background from construction on. Whatever path the
/// evaluation takes, it is released (with "go" or an abort) and waited for before this object
/// goes away.
class HarnessStep {
 public:
  HarnessStep(const Harness* harness, HarnessCall call);
  ~HarnessStep();
  HarnessStep(const HarnessStep&) = delete;
  HarnessStep& operator=(const HarnessStep&) = delete;

  /// Lets a gated process proceed, and waits for the process to end.
  HarnessResult go();
  /// timing.py's two gates: lets the process proceed, waits until it announces GATE.ready
  /// (warm-up done), then writes the secret of its timed calls to GATE.time and times, on this
  /// process's clock, how long it takes from there to the end of the process.
  HarnessResult go_timed(const std::string& secret_hex);
  /// Where go_timed() writes the secret (for check.py --timed to read afterwards).
  std::filesystem::path secret_path() const { return call_.gate.string() + ".time"; }
  /// Whether the process is still starting up: gated, not yet released, and neither at its gate
  /// (GATE.waiting) nor ended.
  bool starting() const;
  /// Calls the step off: the process is told so, and killed if it is still starting up.
  void abort();
  const HarnessCall& call() const { return call_; }

 private:
  void release(bool go);
  HarnessCall call_;
  std::future<HarnessResult> future_;
  bool released_ = false;
};

/// A field of a harness report, or def when it is missing or of another type. Reports from a
/// candidate's process are written by code we do not trust, so no shape is assumed.
template <typename T>
T report_field(const nlohmann::json& j, const char* key, T def) {
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

inline std::string report_field(const nlohmann::json& j, const char* key, const char* def) {
  return report_field<std::string>(j, key, def);
}

}  // namespace cuda_agent
