#include "cli/tasks_command.h"

#include <cstdio>
#include <iostream>
#include <map>
#include <mutex>

#include "cli/exit_status.h"
#include "sandbox/process_runner.h"
#include "synth/capture.h"
#include "task/dataset_import.h"
#include "task/suite.h"
#include "task/suite_check.h"
#include "task/synth.h"
#include "util/files.h"
#include "util/paths.h"

namespace fs = std::filesystem;

namespace cuda_agent {
namespace {

constexpr int kExitDropped = kExitFail;  // tasks check: some tasks were dropped

std::string ms(const nlohmann::json& m, const char* key) {
  if (!m.contains(key) || !m[key].is_number()) return "-";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3f", m[key].get<double>());
  return buffer;
}

std::string reasons_text(const TaskVerdict& v) {
  std::string text;
  for (const DropReason& r : v.reasons) text += (text.empty() ? "" : ", ") + r.name;
  return text;
}

void print_suite(const Suite& suite) {
  std::map<std::string, int> levels;
  for (const SuiteTask& t : suite.tasks) levels[t.level.empty() ? "-" : t.level]++;
  std::printf("%-16s %5zu tasks  %s\n", suite.name.c_str(), suite.tasks.size(),
              suite.root.string().c_str());
  for (const auto& [level, count] : levels) std::printf("  %-14s %5d\n", level.c_str(), count);
}

}  // namespace

struct TasksCommand::Args {
  CLI::App* tasks = nullptr;
  CLI::App* list_cmd = nullptr;
  CLI::App* check_cmd = nullptr;
  CLI::App* synth_cmd = nullptr;
  CLI::App* import_cmd = nullptr;
  CLI::App* graph_cmd = nullptr;

  std::vector<std::string> list_dirs;

  std::string check_dir;
  SuiteCheckOptions check;
  std::vector<double> window;
  bool no_window = false;
  std::vector<std::string> references;
  std::string report_path = "tasks-check.json";
  std::string work_dir;

  SynthOptions synth_options;
  std::string synth_out;

  std::string import_format;
  std::string import_source;
  ImportOptions import_options;
  std::string import_out;

  std::string graph_task;
  bool graph_json = false;
  synth::CaptureOptions capture;
};

TasksCommand::TasksCommand(CLI::App* app, const std::string& default_device)
    : args_(std::make_unique<Args>()) {
  Args& a = *args_;
  a.check.device = default_device;
  a.tasks = app->add_subcommand("tasks", "list, check, synthesize and import tasks");
  a.tasks->require_subcommand(1);

  a.list_cmd = a.tasks->add_subcommand("list", "suites with their levels and task counts");
  a.list_cmd->add_option("dirs", a.list_dirs,
                         "suite folders (default: the built-in suite and the imported ones)");

  a.check_cmd = a.tasks->add_subcommand(
      "check", "run every task of a suite through the dataset filters; exit 1 if any is dropped");
  a.check_cmd->add_option("dir", a.check_dir, "suite folder, or a folder of task files")
      ->required();
  a.check_cmd->add_option("--device", a.check.device, "cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  a.check_cmd
      ->add_option("--shrink", a.check.shrink,
                   "divide each task's SCALABLE_SIZES constants by this (a smaller run, "
                   "recorded in the report)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  a.check_cmd
      ->add_option(
          "--jobs", a.check.jobs,
          "checking processes at once (on cuda their GPU work takes turns, compiles overlap)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  a.check_cmd
      ->add_option("--window-ms", a.window,
                   "eager runtime window MIN MAX in ms (default on cuda 0.5 20; on cpu none)")
      ->expected(2);
  a.check_cmd->add_flag("--no-window", a.no_window, "no runtime window, on any device");
  a.check_cmd->add_option("--reference", a.references,
                          "suite whose near-copies are dropped (repeatable), e.g. a KernelBench "
                          "import");
  a.check_cmd
      ->add_option("--max-similarity", a.check.max_similarity,
                   "graph similarity at or above which a task is a near-copy")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  a.check_cmd->add_option("--task-timeout", a.check.task_timeout_s, "seconds allowed per task")
      ->capture_default_str();
  a.check_cmd
      ->add_option("--timing-budget", a.check.timing_budget_s,
                   "seconds spent timing each of eager and torch.compile per task")
      ->capture_default_str();
  a.check_cmd->add_option("--report", a.report_path, "where the JSON report goes")
      ->capture_default_str();
  a.check_cmd->add_option(
      "--work-dir", a.work_dir,
      "measurements kept for resuming (default ~/.cache/cuda-agent/tasks-check)");
  a.check_cmd->add_option("--python", a.check.python, "Python with torch")->capture_default_str();

  a.synth_cmd = a.tasks->add_subcommand(
      "synth", "compose new tasks from the typed operator library (no model needed)");
  a.synth_cmd->add_option("--count", a.synth_options.count, "tasks to write")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  a.synth_cmd->add_option("--seed", a.synth_options.seed, "the same seed writes the same tasks")
      ->capture_default_str();
  a.synth_cmd->add_option("--min-ops", a.synth_options.min_ops, "fewest operators per task")
      ->capture_default_str();
  a.synth_cmd->add_option("--max-ops", a.synth_options.max_ops, "most operators per task")
      ->capture_default_str();
  a.synth_cmd->add_option("--out", a.synth_out, "folder for the task files (missing or empty)")
      ->required();

  a.import_cmd = a.tasks->add_subcommand("import",
                                         "make a suite of a KernelBench checkout or of "
                                         "Ops-6K-format records");
  a.import_cmd->add_option("format", a.import_format, "kernelbench or ops6k")
      ->check(CLI::IsMember({"kernelbench", "ops6k"}))
      ->required();
  a.import_cmd
      ->add_option("source", a.import_source,
                   "KernelBench checkout, or a .jsonl / .parquet file of records")
      ->required();
  a.import_cmd->add_option("--out", a.import_out,
                           "the new suite's folder (default ~/.cache/cuda-agent/suites/FORMAT)");
  a.import_cmd->add_option("--name", a.import_options.name, "suite name (default: FORMAT)");
  a.import_cmd->add_option("--code-field", a.import_options.code_field,
                           "ops6k: the field holding each task's code (default: code)");
  a.import_cmd->add_option("--python", a.import_options.python, "Python with pyarrow, for Parquet")
      ->capture_default_str();

  a.graph_cmd = a.tasks->add_subcommand(
      "graph",
      "a task's captured graph: its inputs and weights, every op with its shapes and its "
      "class (elementwise, reduction, gemm, ...), and the ops of no class");
  a.graph_cmd->add_option("task", a.graph_task, "task file")->required();
  a.graph_cmd->add_flag("--json", a.graph_json, "print the graph IR document itself");
  a.graph_cmd->add_option("--shrink", a.capture.shrink, "divide the task's SCALABLE_SIZES")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  a.graph_cmd->add_option("--python", a.capture.python, "Python with torch")->capture_default_str();
}

TasksCommand::~TasksCommand() = default;

namespace {

std::string shape_text(const synth::Value& v) {
  std::string out;
  for (const synth::TensorType& t : v.results) {
    std::string dims;
    for (std::int64_t d : t.shape) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
    out += (out.empty() ? "" : " ") + std::string("(") + dims + ") " + t.dtype;
  }
  return out;
}

}  // namespace

int TasksCommand::run_graph() {
  Args& a = *args_;
  a.capture.harness_dir = harness_dir();
  PosixProcessRunner runner;
  synth::Graph graph;
  nlohmann::json document;
  if (Status s = synth::capture_graph(a.graph_task, a.capture, &runner, &graph, &document);
      !s.ok()) {
    return fail(s);
  }
  if (a.graph_json) {
    std::cout << document.dump(2) << "\n";
    return kExitPass;
  }
  for (const synth::Value& v : graph.values) {
    if (v.kind == "op") continue;
    std::printf("%-10s %-28s %s\n", v.kind.c_str(), v.name.c_str(), shape_text(v).c_str());
  }
  for (const synth::Op& op : graph.ops) {
    const synth::Value& v = graph.values[op.value];
    std::printf("%-14s %-28s %-34s %s\n", synth::op_class_name(op.op_class), v.name.c_str(),
                op.target.c_str(), shape_text(v).c_str());
  }
  std::vector<std::string> unsupported = graph.unsupported_ops();
  if (unsupported.empty()) {
    std::printf("all %zu ops classified\n", graph.ops.size());
  } else {
    std::string list;
    for (const std::string& name : unsupported) list += (list.empty() ? "" : ", ") + name;
    std::printf("ops of no class: %s\n", list.c_str());
  }
  return kExitPass;
}

bool TasksCommand::chosen() const { return args_->tasks->parsed(); }

int TasksCommand::run() {
  Args& a = *args_;
  if (a.list_cmd->parsed()) {
    std::vector<Suite> suites;
    if (a.list_dirs.empty()) {
      Suite builtin;
      if (load_suite(builtin_suite_dir(), &builtin).ok()) suites.push_back(builtin);
      for (Suite& s : find_suites(imported_suites_dir())) suites.push_back(std::move(s));
    }
    for (const std::string& dir : a.list_dirs) {
      Suite suite;
      if (Status s = load_suite(dir, &suite); !s.ok()) return fail(s);
      suites.push_back(std::move(suite));
    }
    if (suites.empty()) {
      std::cout << "no suites found (the built-in one is " << builtin_suite_dir().string()
                << "; imported ones go to " << imported_suites_dir().string() << ")\n";
    }
    for (const Suite& suite : suites) print_suite(suite);
    return kExitPass;
  }

  if (a.check_cmd->parsed()) {
    Suite suite;
    if (Status s = load_suite(a.check_dir, &suite); !s.ok()) return fail(s);
    SuiteCheckOptions& o = a.check;
    o.harness_dir = harness_dir();
    o.work_dir = a.work_dir.empty() ? default_cache_dir() / "tasks-check" : fs::path(a.work_dir);
    for (const std::string& r : a.references) o.reference_dirs.push_back(r);
    o.policy.check_window = !a.no_window && (o.device == "cuda" || !a.window.empty());
    if (!a.window.empty()) {
      if (a.window[0] < 0 || a.window[1] <= a.window[0]) {
        return fail(Status::InvalidArgument("--window-ms needs MIN < MAX, both >= 0"));
      }
      o.policy.window_min_ms = a.window[0];
      o.policy.window_max_ms = a.window[1];
    }
    std::mutex print;
    o.on_verdict = [&print](const TaskVerdict& v, int done, int total) {
      std::lock_guard<std::mutex> lock(print);
      std::fprintf(stderr, "[%3d/%d] %-44s %-7s eager %9s ms  compile %9s ms  %s\n", done, total,
                   v.task.id.c_str(), v.kept ? "kept" : "dropped",
                   ms(v.measurement, "eager_ms").c_str(), ms(v.measurement, "compile_ms").c_str(),
                   reasons_text(v).c_str());
    };
    std::cerr << "checking " << suite.tasks.size() << " tasks of " << suite.name << " on "
              << o.device << (o.shrink > 1 ? " at sizes / " + std::to_string(o.shrink) : "")
              << " with " << o.jobs << " process(es)\n";
    PosixProcessRunner runner;
    SuiteCheckReport report;
    if (Status s = check_suite(suite, o, &runner, &report); !s.ok()) return fail(s);
    if (Status s = write_file_atomic(a.report_path, report.to_json().dump(2) + "\n"); !s.ok()) {
      return fail(s);
    }
    std::map<std::string, int> by_reason;
    for (const TaskVerdict& v : report.verdicts) {
      for (const DropReason& r : v.reasons) by_reason[r.name]++;
    }
    std::printf("%s on %s%s: kept %d of %zu\n", report.suite.c_str(),
                report.device_name.empty() ? o.device.c_str() : report.device_name.c_str(),
                o.shrink > 1 ? (" at sizes / " + std::to_string(o.shrink)).c_str() : "",
                report.kept(), report.verdicts.size());
    for (const auto& [reason, count] : by_reason) {
      std::printf("  dropped for %-24s %d\n", reason.c_str(), count);
    }
    for (const TaskVerdict& v : report.verdicts) {
      for (const DropReason& r : v.reasons) {
        std::printf("  %s: %s: %s\n", v.task.id.c_str(), r.name.c_str(), r.detail.c_str());
      }
    }
    std::printf("report: %s\n", fs::absolute(a.report_path).string().c_str());
    return report.kept() == static_cast<int>(report.verdicts.size()) ? kExitPass : kExitDropped;
  }

  if (a.graph_cmd->parsed()) return run_graph();

  if (a.synth_cmd->parsed()) {
    std::vector<SynthTask> tasks;
    if (Status s = synthesize_tasks(a.synth_options, &tasks); !s.ok()) return fail(s);
    fs::path out = a.synth_out;
    std::error_code ec;
    if (fs::exists(out, ec) && !fs::is_empty(out, ec)) {
      return fail(Status::InvalidArgument("--out " + out.string() + " is not empty"));
    }
    fs::create_directories(out, ec);
    nlohmann::json manifest = {
        {"name", out.filename().string()},
        {"description", "tasks composed by cuda-agent tasks synth"},
        {"source", "tasks synth --seed " + std::to_string(a.synth_options.seed)}};
    for (const SynthTask& t : tasks) {
      if (Status s = write_file_atomic(out / (t.id + ".py"), t.source); !s.ok()) return fail(s);
    }
    if (Status s = write_file_atomic(out / "suite.json", manifest.dump(2) + "\n"); !s.ok()) {
      return fail(s);
    }
    std::cout << "wrote " << tasks.size() << " tasks to " << out.string()
              << "\nnext: cuda-agent tasks check " << out.string() << "\n";
    return kExitPass;
  }

  // import
  ImportOptions& o = a.import_options;
  if (o.name.empty()) o.name = a.import_format;
  o.out = a.import_out.empty() ? imported_suites_dir() / o.name : fs::path(a.import_out);
  o.harness_dir = harness_dir();
  ImportSummary summary;
  PosixProcessRunner runner;
  Status s = a.import_format == "kernelbench" ? import_kernelbench(a.import_source, o, &summary)
                                              : import_ops6k(a.import_source, o, &runner, &summary);
  if (!s.ok()) return fail(s);
  for (const std::string& line : summary.skipped) std::cerr << "skipped: " << line << "\n";
  std::cout << "imported " << summary.imported << " tasks into " << o.out.string() << " ("
            << summary.skipped.size() << " skipped)\nnext: cuda-agent tasks check "
            << o.out.string() << "\n";
  return kExitPass;
}

}  // namespace cuda_agent
