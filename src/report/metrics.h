/// What a benchmark run measured, task by task, and the figures a reader wants from it: pass
/// rate, the shares faster than eager PyTorch and torch.compile, geometric-mean speedups over
/// each (the CUDA Agent paper's table), and KernelBench's fast_p, per level and overall.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace cuda_agent::report {

/// One task's result in a bench run, as the run store keeps it.
struct TaskResult {
  static constexpr const char* kSchema = "cuda-agent.bench-result/1";

  std::string task;   // the suite's id: "level1/001_relu"
  int sample = -1;    // in a run of groups (rollouts): which of the task's episodes, from 0
  std::string level;  // "level1", or "" in a suite without levels
  /// An evaluation's outcome ("pass", "mismatch", ...), or "no_plan" when the policy wrote no
  /// candidate, "error" when the episode reached no verdict otherwise (a task that does not run,
  /// a crash), or "timeout" when the task's episode ran past its limit.
  std::string outcome;
  bool correct = false;
  std::optional<int> reward;
  std::optional<double> eager_us, compile_us, candidate_us;
  std::optional<double> speedup_vs_eager, speedup_vs_compile;
  std::string reason;        // one sentence
  std::string device_name;   // e.g. "NVIDIA H200"
  long long evaluation = 0;  // the final evaluation's id in the worker's run store (0: none)
  std::string run;           // the episode's trajectory ("r12"), or ""
  int evaluations = 0;       // candidates evaluated in the episode (tuning tries included)
  double seconds = 0;        // the episode's wall time
  std::string worker;        // where it ran: "gpu 0", "cpu 1", "ray actor 2 on HOST"

  /// The task, with "#k" for sample k of a group: what the run keys its results by.
  std::string key() const;

  nlohmann::json to_json() const;
  static TaskResult from_json(const nlohmann::json& j);
};

/// Whether a task is correct and timed against both baselines (it has both speedups).
bool timed(const TaskResult& r);

/// KernelBench's thresholds: fast_p is the share of all tasks that are correct and more than p
/// times as fast as the baseline.
inline const std::vector<double> kFastP = {0, 0.5, 0.8, 1, 1.5, 2};

struct Metrics {
  std::string level;  // "all" for the whole run
  int tasks = 0;
  int correct = 0;
  int faster_than_eager = 0;    // correct and speedup over eager > 1
  int faster_than_compile = 0;  // correct and speedup over torch.compile > 1
  /// Geometric means over the correct tasks that were timed; empty when there are none.
  std::optional<double> geomean_vs_eager, geomean_vs_compile;
  std::vector<int> fast_p_eager, fast_p_compile;  // counts, one per kFastP
  std::map<int, int> rewards;                     // reward -> tasks (no reward: not counted)
  int evaluations = 0;                            // candidates evaluated
  double seconds = 0;                             // summed episode wall time

  double share(int count) const { return tasks ? static_cast<double>(count) / tasks : 0; }
};

/// One Metrics per level (in order), then "all". A suite without levels gives "all" alone.
std::vector<Metrics> compute_metrics(const std::vector<TaskResult>& results);

/// The figures as text: a row per figure (its name, then a cell per level), after a first row
/// that names the levels. The terminal's table and the HTML report's show these rows.
std::vector<std::vector<std::string>> metric_rows(const std::vector<Metrics>& metrics);

/// The metrics as a table for a terminal: one row per figure, one column per level.
std::string format_metrics(const std::vector<Metrics>& metrics);

/// Every task's row for a terminal: outcome, reward, speedups, candidates evaluated, seconds, and
/// the reason of each failure.
std::string format_tasks(const std::vector<TaskResult>& results);

/// "1.23x", or "-" when empty.
std::string format_ratio(const std::optional<double>& ratio);

/// Two runs side by side: every task of either, with both outcomes and speedups over
/// torch.compile and their ratio, then the aggregate (each run's figures over all its tasks, and
/// over the tasks both ran: wins, losses and the geometric mean of B's speedup over A's).
std::string format_compare(const std::string& name_a, const std::vector<TaskResult>& a,
                           const std::string& name_b, const std::vector<TaskResult>& b);

/// A self-contained HTML page (no script, no file or network fetch) with the metrics table, the
/// run's settings, four SVG plots (speedup distribution, speedup against eager time, per-level
/// bars, reward histogram) and every task's row. run: the bench run's record.
std::string render_html(const std::string& title, const nlohmann::json& run,
                        const std::vector<TaskResult>& results);

}  // namespace cuda_agent::report
