/// The one record an evaluation produces: printed with --json, stored in the run store, read by
/// reports, rewards and trainers. Its schema is written once, here.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace cuda_agent {

/// How an evaluation ended. Everything but kPass scores -1.
enum class Outcome {
  kPass,            // compiled, correct, no rule broken (and, for stage "all", profiled)
  kCompileError,    // kernels/ did not build
  kMismatch,        // wrong outputs, or inputs modified
  kViolation,       // broke a rule: torch compute in forward, modified infrastructure, ...
  kRuntimeError,    // raised an exception (a CUDA error, a bad shape, ...)
  kCrash,           // the candidate's process died on a signal (segfault, abort)
  kTimeout,         // the candidate's process did not finish in time
  kInterrupted,     // the user stopped the evaluation
  kDegenerateTask,  // the task's output can be matched without computing it: no verdict
};

const char* outcome_name(Outcome outcome);

/// A rule broken (a violation) or a construct worth a look (a warning). file and line are set
/// when a source rule found it.
struct Violation {
  Violation() = default;
  Violation(std::string rule, std::string detail, std::string file = {}, int line = 0)
      : rule(std::move(rule)), detail(std::move(detail)), file(std::move(file)), line(line) {}

  std::string rule;    // e.g. "torch_compute_op", "infrastructure_modified", "inputs_modified"
  std::string detail;  // one sentence
  std::string file;    // relative to the workspace, or empty
  int line = 0;        // 0: not tied to a line
};

/// One check the evaluator ran (or skipped), for `eval --explain`: what it looked at and what it
/// saw. status is "passed", "failed", "warning" or "skipped".
struct Check {
  std::string name;  // e.g. "source rules", "timed outputs recomputed"
  std::string status;
  std::string detail;  // one sentence: what it saw
};

/// One stage's account: status is "ok", "failed", "skipped" or "cached".
struct StageReport {
  std::string status = "skipped";
  double seconds = 0;
  std::string detail;                              // one sentence for a person
  nlohmann::json data = nlohmann::json::object();  // the stage's own figures
  std::string log;                                 // trimmed output
};

struct EvalResult {
  static constexpr const char* kSchema = "cuda-agent.eval/1";

  long long id = 0;  // in the run store, once stored
  std::string task_id, task_path, task_sha256;
  std::string workspace;
  std::string device;       // "cpu" or "cuda"
  std::string device_name;  // e.g. "NVIDIA H200"
  std::string torch_version;
  std::string stage = "all";  // how far the evaluation was asked to go

  Outcome outcome = Outcome::kPass;
  std::string reason;  // one sentence: why it failed, or a summary when it passed
  bool compiled = false;
  bool correct = false;
  std::vector<Violation> violations;
  std::vector<Violation> warnings;
  std::vector<Check> checks;  // in the order they ran

  std::optional<double> eager_us, compile_us, candidate_us;
  std::optional<double> speedup_vs_eager, speedup_vs_compile;

  std::optional<int> reward;  // set when the whole pipeline ran (stage "all") or it failed
  std::string reward_recipe;
  std::optional<double> reward_value;  // reward_recipe's value (eval/reward.h), when reward is set
  std::optional<double> log_speedup;   // continuous recipe: ln(compile_us / candidate_us)

  StageReport compile, verify, profile;
  nlohmann::json settings = nlohmann::json::object();
  nlohmann::json sandbox = nlohmann::json::object();

  bool passed() const { return outcome == Outcome::kPass; }
  nlohmann::json to_json() const;
  static EvalResult from_json(const nlohmann::json& j);
};

/// A few lines for a terminal: outcome, reason, stage times, speedups, reward.
std::string format_summary(const EvalResult& result);

/// Every check that ran, one line each, with what it saw (`eval --explain`).
std::string format_checks(const EvalResult& result);

}  // namespace cuda_agent
