#include "cli/bench_command.h"

#include <fnmatch.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <sstream>

#include "bench/bench.h"
#include "cli/exit_status.h"
#include "report/metrics.h"
#include "store/store.h"
#include "task/suite.h"
#include "util/files.h"
#include "util/paths.h"

namespace fs = std::filesystem;

namespace cuda_agent {
namespace {

/// A suite by folder, or by name among the built-in and imported ones.
Status find_suite(const std::string& which, Suite* suite) {
  std::error_code ec;
  if (fs::is_directory(which, ec)) return load_suite(which, suite);
  std::vector<Suite> known;
  Suite builtin;
  if (load_suite(builtin_suite_dir(), &builtin).ok()) known.push_back(builtin);
  for (Suite& s : find_suites(imported_suites_dir())) known.push_back(std::move(s));
  std::string names;
  for (Suite& s : known) {
    if (s.name == which) {
      *suite = std::move(s);
      return Status::OK();
    }
    names += (names.empty() ? "" : ", ") + s.name;
  }
  return Status::NotFound("no suite " + which + ": give a folder of tasks, or one of: " + names);
}

Status open_store(const std::string& path, std::unique_ptr<Store>* store) {
  return Store::Open(path.empty() ? default_store_path() : fs::path(path), store);
}

}  // namespace

struct BenchCommands::Args {
  CLI::App *bench = nullptr, *report = nullptr, *compare = nullptr;
  // bench
  std::string suite;
  std::vector<std::string> filters;
  std::string resume;
  std::string gpus;
  int jobs = 0;
  std::string ray;
  int ray_workers = 0;
  std::string html;
  std::string work_root;
  bench::BenchSettings settings;
  std::string endpoint, model, api_key_env;
  int max_turns = 0;
  bool quiet = false;
  // report, compare
  std::string run_a, run_b;
  bool as_json = false;
};

BenchCommands::BenchCommands(CLI::App* app, const std::string& default_device)
    : args_(std::make_unique<Args>()) {
  Args& a = *args_;
  a.settings.device = default_device;
  a.bench = app->add_subcommand("bench", "run every task of a suite through a policy (resumable)");
  a.bench->add_option("--suite", a.suite,
                      "a folder of tasks, or a suite's name (builtin, or one tasks import wrote)");
  a.bench->add_option("--filter", a.filters,
                      "only the tasks whose id matches one of these patterns (level1/*, *relu*)");
  a.bench->add_option("--policy", a.settings.policy, "synth or llm")
      ->check(CLI::IsMember({"synth", "llm"}))
      ->capture_default_str();
  a.bench->add_option("--resume", a.resume,
                      "carry on bench run RUN (b3) where it stopped, with its recorded settings");
  a.bench->add_option("--gpus", a.gpus, "cuda: the GPUs to use, e.g. 0,1,2,3 (default 0)");
  a.bench
      ->add_option("--jobs", a.jobs,
                   "episodes at once (default: two per GPU, so one compiles while the other "
                   "runs on the device; 2 on the CPU)")
      ->check(CLI::Range(1, 1024));
  a.bench->add_option("--device", a.settings.device, "cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  a.bench
      ->add_option("--shrink", a.settings.shrink,
                   "divide each task's SCALABLE_SIZES constants by this")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  a.bench->add_option("--tune", a.settings.tune, "synth: auto, always or off")
      ->check(CLI::IsMember({"auto", "always", "off"}))
      ->capture_default_str();
  a.bench
      ->add_option("--task-timeout", a.settings.task_timeout_s,
                   "seconds one task's episode may take, all its evaluations included")
      ->check(CLI::Range(1.0, 1e7))
      ->capture_default_str();
  a.bench->add_option("--endpoint", a.endpoint, "llm: the OpenAI-compatible server's base URL");
  a.bench->add_option("--model", a.model, "llm: the model name the server serves");
  a.bench->add_option("--api-key-env", a.api_key_env,
                      "llm: the environment variable holding the API key");
  a.bench->add_option("--max-turns", a.max_turns, "llm: turns per episode");
  a.bench->add_option("--ray", a.ray,
                      "run the episodes on Ray actors, one per GPU: a cluster's address, auto, "
                      "or local (starts one on this machine)");
  a.bench->add_option("--ray-workers", a.ray_workers,
                      "Ray actors (default: one per GPU of the cluster; 1 on the CPU)");
  a.bench->add_option("--html", a.html, "also write the HTML report here when the run ends");
  a.bench->add_option("--work-dir", a.work_root,
                      "where the episodes' workspaces go (default ~/.cache/cuda-agent/bench)");
  a.bench->add_flag("--quiet", a.quiet, "no progress, only the tables at the end");

  a.report = app->add_subcommand("report", "print a bench run's figures; --html for the report");
  a.report->add_option("run", a.run_a, "the bench run (b3)")->required();
  a.report->add_option("--html", a.html, "write the HTML report with plots to this file");
  a.report->add_flag("--json", a.as_json, "print the run's record and results as JSON");

  a.compare = app->add_subcommand("compare", "compare two bench runs task by task");
  a.compare->add_option("run_a", a.run_a, "the first bench run (b3)")->required();
  a.compare->add_option("run_b", a.run_b, "the second bench run (b4)")->required();
}

BenchCommands::~BenchCommands() = default;

bool BenchCommands::chosen() const {
  return args_->bench->parsed() || args_->report->parsed() || args_->compare->parsed();
}

int BenchCommands::run(const std::string& store_path) {
  if (args_->bench->parsed()) return bench(store_path);
  if (args_->report->parsed()) return report(store_path);
  return compare(store_path);
}

namespace {

Status write_html(const std::string& path, const std::string& name, const nlohmann::json& record,
                  const std::vector<report::TaskResult>& results) {
  const std::string title = "cuda-agent bench " + name + ": " + record.value("suite", "") +
                            " with " + record.value("policy", "") + " on " +
                            record.value("device_name", record.value("device", ""));
  nlohmann::json shown = record;
  shown["throughput"] = bench::format_throughput(record);
  return write_file_atomic(path, report::render_html(title, shown, results));
}

}  // namespace

int BenchCommands::bench(const std::string& store_path) {
  Args& a = *args_;
  std::unique_ptr<Store> store;
  if (Status s = open_store(store_path, &store); !s.ok()) return fail(s);
  bench::BenchRequest request;
  bench::BenchSettings& settings = request.settings;
  settings = a.settings;
  if (!a.resume.empty()) {
    std::optional<long long> id = bench::parse_bench_name(a.resume);
    if (!id)
      return fail(Status::InvalidArgument("--resume " + a.resume + ": bench runs are b1, b2, ..."));
    nlohmann::json record;
    if (Status s = store->get_bench(*id, &record); !s.ok()) return fail(s);
    if (Status s = bench::BenchSettings::from_json(record["settings"], &settings); !s.ok())
      return fail(s);
    for (const char* fixed :
         {"--suite", "--filter", "--policy", "--device", "--shrink", "--tune", "--task-timeout",
          "--endpoint", "--model", "--api-key-env", "--max-turns"}) {
      if (a.bench->count(fixed) > 0) {
        return fail(Status::InvalidArgument(
            std::string("--resume carries on with the run's own settings; leave out ") + fixed));
      }
    }
    request.resume = *id;
  } else {
    if (a.suite.empty())
      return fail(Status::InvalidArgument("bench needs --suite (or --resume RUN)"));
    Suite suite;
    if (Status s = find_suite(a.suite, &suite); !s.ok()) return fail(s);
    settings.suite = fs::absolute(suite.root);
    settings.suite_name = suite.name;
    for (const SuiteTask& t : suite.tasks) {
      // Shell patterns (*, ?, [...]) as the Glob tool reads them; * also crosses a '/'.
      bool keep = a.filters.empty();
      for (const std::string& f : a.filters)
        keep = keep || fnmatch(f.c_str(), t.id.c_str(), 0) == 0;
      if (keep) settings.tasks.push_back(t.id);
    }
    if (settings.tasks.empty()) {
      return fail(Status::InvalidArgument("no task of suite " + suite.name + " matches --filter"));
    }
    if (settings.policy == "llm") {
      if (a.endpoint.empty() || a.model.empty())
        return fail(Status::InvalidArgument("--policy llm needs --endpoint URL and --model NAME"));
      settings.policy_args = {"--endpoint", a.endpoint, "--model", a.model};
      if (!a.api_key_env.empty()) {
        settings.policy_args.insert(settings.policy_args.end(), {"--api-key-env", a.api_key_env});
      }
      if (a.max_turns > 0) {
        settings.policy_args.insert(settings.policy_args.end(),
                                    {"--max-turns", std::to_string(a.max_turns)});
      }
    }
  }
  std::vector<std::string> gpus;
  std::istringstream gpu_list(a.gpus);
  for (std::string gpu; std::getline(gpu_list, gpu, ',');) {
    if (!gpu.empty()) gpus.push_back(gpu);
  }
  if (gpus.empty()) gpus.push_back("0");
  const int jobs = a.jobs > 0                  ? a.jobs
                   : settings.device == "cuda" ? 2 * static_cast<int>(gpus.size())
                                               : 2;

  std::unique_ptr<bench::Executor> executor;
  const fs::path bench_dir =
      a.work_root.empty() ? default_cache_dir() / "bench" : fs::path(a.work_root);
  if (!a.ray.empty()) {
    bench::RayExecutor::Options o;
    o.adapter = harness_dir() / "ray_workers.py";
    o.address = a.ray;
    o.device = settings.device;
    o.workers = a.ray_workers;
    o.concurrency = a.jobs > 0 ? a.jobs : 2;
    o.log = bench_dir / "ray-workers.log";
    if (!a.quiet) std::cerr << "bench: starting Ray workers (" << a.ray << ")\n";
    std::unique_ptr<bench::RayExecutor> ray;
    if (Status s = bench::RayExecutor::Start(o, &ray); !s.ok()) return fail(s);
    executor = std::move(ray);
  } else {
    executor = std::make_unique<bench::LocalExecutor>(settings.device, gpus, jobs,
                                                      default_cache_dir() / "locks");
  }
  request.binary = self_executable();
  request.store = store->path();
  request.work_root = bench_dir;
  request.tty = ::isatty(2) && !a.quiet;
  if (!a.quiet) {
    request.progress = [tty = request.tty](const std::string& line, bool task_done) {
      if (tty) {
        std::cerr << "\r\033[K" << line << std::flush;
        if (task_done) std::cerr << "\n";
      } else if (task_done) {
        std::cerr << line << "\n";
      }
    };
  }
  bench::BenchSummary summary;
  Status ran = bench::run_bench(request, store.get(), executor.get(), &summary);
  executor.reset();  // Ray's actors stop here
  if (request.tty) std::cerr << "\n";
  if (!ran.ok()) return fail(ran);
  const std::string name = bench::bench_name(summary.id);
  if (summary.pending > 0) {
    std::cerr << "bench " << name << " interrupted with " << summary.pending
              << " task(s) left; carry on with: cuda-agent bench --resume " << name << "\n";
    return kExitError;
  }
  std::cout << "bench " << name << ": " << settings.suite_name << " (" << settings.tasks.size()
            << " tasks) with " << settings.policy << " on " << settings.device << "\n\n"
            << report::format_metrics(report::compute_metrics(summary.results)) << "\n"
            << "throughput: " << bench::format_throughput(summary.record) << "\n";
  if (!a.html.empty()) {
    if (Status s = write_html(a.html, name, summary.record, summary.results); !s.ok())
      return fail(s);
    std::cout << "report: " << a.html << "\n";
  }
  return kExitPass;
}

int BenchCommands::report(const std::string& store_path) {
  Args& a = *args_;
  std::unique_ptr<Store> store;
  if (Status s = open_store(store_path, &store); !s.ok()) return fail(s);
  nlohmann::json record;
  std::vector<report::TaskResult> results;
  if (Status s = bench::load_bench(store.get(), a.run_a, &record, &results); !s.ok())
    return fail(s);
  const std::string name = bench::bench_name(*bench::parse_bench_name(a.run_a));
  if (a.as_json) {
    nlohmann::json out = record;
    out["id"] = name;
    out["results"] = nlohmann::json::array();
    for (const auto& r : results) out["results"].push_back(r.to_json());
    std::cout << out.dump(2) << "\n";
  } else {
    const std::size_t total = record["settings"].value("tasks", nlohmann::json::array()).size() *
                              record["settings"].value("group_size", 1);
    std::cout << "bench " << name << ": " << record.value("suite", "") << " with "
              << record.value("policy", "") << " on " << record.value("device", "") << ", "
              << results.size() << " of " << total
              << (record["settings"].value("group_size", 1) > 1 ? " episodes" : " tasks")
              << " done\n\n"
              << report::format_tasks(results) << "\n"
              << report::format_metrics(report::compute_metrics(results)) << "\n"
              << "throughput: " << bench::format_throughput(record) << "\n";
  }
  if (!a.html.empty()) {
    if (Status s = write_html(a.html, name, record, results); !s.ok()) return fail(s);
    if (!a.as_json) std::cout << "report: " << a.html << "\n";
  }
  return kExitPass;
}

int BenchCommands::compare(const std::string& store_path) {
  Args& a = *args_;
  std::unique_ptr<Store> store;
  if (Status s = open_store(store_path, &store); !s.ok()) return fail(s);
  nlohmann::json ra, rb;
  std::vector<report::TaskResult> a_results, b_results;
  if (Status s = bench::load_bench(store.get(), a.run_a, &ra, &a_results); !s.ok()) return fail(s);
  if (Status s = bench::load_bench(store.get(), a.run_b, &rb, &b_results); !s.ok()) return fail(s);
  const std::string na = bench::bench_name(*bench::parse_bench_name(a.run_a));
  const std::string nb = bench::bench_name(*bench::parse_bench_name(a.run_b));
  std::cout << na << ": " << ra.value("suite", "") << " with " << ra.value("policy", "") << " on "
            << ra.value("device", "") << "\n"
            << nb << ": " << rb.value("suite", "") << " with " << rb.value("policy", "") << " on "
            << rb.value("device", "") << "\n\n"
            << report::format_compare(na, a_results, nb, b_results);
  return kExitPass;
}

}  // namespace cuda_agent
