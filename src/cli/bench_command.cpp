#include "cli/bench_command.h"

#include <unistd.h>

#include <fstream>
#include <iostream>
#include <sstream>

#include "bench/bench.h"
#include "cli/exit_status.h"
#include "cli/precision_flag.h"
#include "eval/reward.h"
#include "report/metrics.h"
#include "rl/export.h"
#include "store/store.h"
#include "task/suite.h"
#include "util/files.h"
#include "util/paths.h"

namespace fs = std::filesystem;

namespace cuda_agent {
namespace {}  // namespace

struct BenchCommands::Args {
  CLI::App *bench = nullptr, *rollout = nullptr, *report = nullptr, *compare = nullptr;
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
  // rollout
  rl::RolloutOptions rollout_options;
  std::string out;
  // report, compare
  std::string run_a, run_b;
  bool as_json = false;
};

BenchCommands::BenchCommands(CLI::App* app, const std::string& default_device)
    : args_(std::make_unique<Args>()) {
  Args& a = *args_;
  a.settings.device = default_device;
  // bench and rollout run episodes alike; a rollout runs a group of them per task.
  auto add_run_options = [&a](CLI::App* c) {
    c->add_option("--suite", a.suite,
                  "a folder of tasks, or a suite's name (builtin, or one tasks import wrote)");
    c->add_option("--filter", a.filters,
                  "only the tasks whose id matches one of these patterns (level1/*, *relu*)");
    c->add_option("--policy", a.settings.policy,
                  "synth or llm (rollout: llm unless given; synth gives a group the same episode)")
        ->check(CLI::IsMember({"synth", "llm"}))
        ->capture_default_str();
    c->add_option("--resume", a.resume,
                  "carry on bench run RUN (b3) where it stopped, with its recorded settings");
    c->add_option("--gpus", a.gpus, "cuda: the GPUs to use, e.g. 0,1,2,3 (default 0)");
    c->add_option("--jobs", a.jobs,
                  "episodes at once (default: two per GPU, so one compiles while the other "
                  "runs on the device; 2 on the CPU)")
        ->check(CLI::Range(1, 1024));
    c->add_option("--device", a.settings.device, "cpu or cuda")
        ->check(CLI::IsMember({"cpu", "cuda"}))
        ->capture_default_str();
    c->add_option("--shrink", a.settings.shrink,
                  "divide each task's SCALABLE_SIZES constants by this")
        ->check(CLI::Range(1, 1 << 20))
        ->capture_default_str();
    add_tf32_flag(c, &a.settings.precision, "in every episode",
                  "the run and its results record it");
    c->add_option("--tune", a.settings.tune, "synth: auto, always or off")
        ->check(CLI::IsMember({"auto", "always", "off"}))
        ->capture_default_str();
    c->add_flag("--fresh-baselines", a.settings.fresh_baselines,
                "time eager and torch.compile afresh in this run, once a task, beside its "
                "candidates, rather than take them from the store where another run timed them");
    c->add_option("--task-timeout", a.settings.task_timeout_s,
                  "seconds one task's episode may take, all its evaluations included")
        ->check(CLI::Range(1.0, 1e7))
        ->capture_default_str();
    c->add_option("--endpoint", a.endpoint, "llm: the OpenAI-compatible server's base URL");
    c->add_option("--model", a.model, "llm: the model name the server serves");
    c->add_option("--api-key-env", a.api_key_env,
                  "llm: the environment variable holding the API key");
    c->add_option("--max-turns", a.max_turns, "llm: turns per episode");
    c->add_option("--ray", a.ray,
                  "run the episodes on Ray actors, one per GPU: a cluster's address, auto, "
                  "or local (starts one on this machine)");
    c->add_option("--ray-workers", a.ray_workers,
                  "Ray actors (default: one per GPU of the cluster; 1 on the CPU)");
    c->add_option("--work-dir", a.work_root,
                  "where the episodes' workspaces go (default ~/.cache/cuda-agent/bench)");
    c->add_flag("--quiet", a.quiet, "no progress, only the tables at the end");
  };
  a.bench = app->add_subcommand("bench", "run every task of a suite through a policy (resumable)");
  add_run_options(a.bench);
  a.bench->add_option("--html", a.html, "also write the HTML report here when the run ends");

  a.rollout = app->add_subcommand(
      "rollout",
      "RL rollouts: a group of episodes per task of a suite (resumable), each rewarded by the "
      "evaluator, with group-normalised advantages and discounted returns, written for trainers");
  add_run_options(a.rollout);
  a.rollout->add_option("--group-size", a.settings.group_size, "episodes per task (GRPO's G)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  a.rollout->add_option("--recipe", a.rollout_options.recipe, "reward recipe: " + recipe_names())
      ->capture_default_str();
  a.rollout
      ->add_option("--advantage", a.rollout_options.estimator,
                   "grpo: (r - mean) / (std + 1e-6) within a task's group; grpo_mean: r - "
                   "mean")
      ->check(CLI::IsMember({"grpo", "grpo_mean"}))
      ->capture_default_str();
  a.rollout
      ->add_option("--gamma", a.rollout_options.gamma,
                   "discount of the returns per turn (the reward comes after the last)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  a.rollout->add_option("--out", a.out,
                        "the rollouts file: .jsonl, or .parquet (default rollouts-bN.jsonl here)");

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
  return args_->bench->parsed() || args_->rollout->parsed() || args_->report->parsed() ||
         args_->compare->parsed();
}

int BenchCommands::run(const std::string& store_path) {
  if (args_->bench->parsed()) return bench(store_path);
  if (args_->rollout->parsed()) return rollout(store_path);
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

Status BenchCommands::run_episodes(CLI::App* command, Store* store,
                                   bench::BenchSettings* settings_out,
                                   bench::BenchSummary* summary) {
  Args& a = *args_;
  bench::BenchRequest request;
  bench::BenchSettings& settings = request.settings;
  settings = a.settings;
  if (!a.resume.empty()) {
    std::optional<long long> id = bench::parse_bench_name(a.resume);
    if (!id)
      return Status::InvalidArgument("--resume " + a.resume + ": bench runs are b1, b2, ...");
    nlohmann::json record;
    if (Status s = store->get_bench(*id, &record); !s.ok()) return s;
    if (Status s = bench::BenchSettings::from_json(record["settings"], &settings); !s.ok())
      return s;
    for (const char* fixed : {"--suite", "--filter", "--policy", "--device", "--shrink", "--tf32",
                              "--tune", "--task-timeout", "--endpoint", "--model", "--api-key-env",
                              "--max-turns", "--group-size", "--fresh-baselines"}) {
      if (command->get_option_no_throw(fixed) && command->count(fixed) > 0) {
        return Status::InvalidArgument(
            std::string("--resume carries on with the run's own settings; leave out ") + fixed);
      }
    }
    request.resume = *id;
  } else {
    if (a.suite.empty())
      return Status::InvalidArgument(command->get_name() + " needs --suite (or --resume RUN)");
    if (command == a.rollout && command->count("--policy") == 0) settings.policy = "llm";
    Suite suite;
    if (Status s = find_suite(a.suite, &suite); !s.ok()) return s;
    settings.suite = fs::absolute(suite.root);
    settings.suite_name = suite.name;
    std::vector<SuiteTask> chosen;
    if (Status s = select_tasks(suite, a.filters, &chosen); !s.ok()) return s;
    for (const SuiteTask& t : chosen) settings.tasks.push_back(t.id);
    if (settings.policy == "llm") {
      if (a.endpoint.empty() || a.model.empty())
        return Status::InvalidArgument("--policy llm needs --endpoint URL and --model NAME");
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
  const std::vector<std::string> gpus = bench::parse_gpus(a.gpus);
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
    if (!a.quiet) std::cerr << command->get_name() << ": starting Ray workers (" << a.ray << ")\n";
    std::unique_ptr<bench::RayExecutor> ray;
    if (Status s = bench::RayExecutor::Start(o, &ray); !s.ok()) return s;
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
  Status ran = bench::run_bench(request, store, executor.get(), summary);
  executor.reset();  // Ray's actors stop here
  if (request.tty) std::cerr << "\n";
  if (!ran.ok()) return ran;
  *settings_out = settings;
  if (summary->pending > 0) {
    const std::string name = bench::bench_name(summary->id);
    return Status::Internal(
        command->get_name() + " " + name + " interrupted with " + std::to_string(summary->pending) +
        " episode(s) left; carry on with: cuda-agent " + command->get_name() + " --resume " + name);
  }
  return Status::OK();
}

int BenchCommands::bench(const std::string& store_path) {
  Args& a = *args_;
  std::unique_ptr<Store> store;
  if (Status s = open_run_store(store_path, &store); !s.ok()) return fail(s);
  bench::BenchSettings settings;
  bench::BenchSummary summary;
  if (Status s = run_episodes(a.bench, store.get(), &settings, &summary); !s.ok()) return fail(s);
  const std::string name = bench::bench_name(summary.id);
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

int BenchCommands::rollout(const std::string& store_path) {
  Args& a = *args_;
  // Refused before any episode runs.
  if (Status s = check_recipe(a.rollout_options.recipe); !s.ok()) return fail(s);
  std::unique_ptr<Store> store;
  if (Status s = open_run_store(store_path, &store); !s.ok()) return fail(s);
  bench::BenchSettings settings;
  bench::BenchSummary summary;
  if (Status s = run_episodes(a.rollout, store.get(), &settings, &summary); !s.ok()) return fail(s);
  const std::string name = bench::bench_name(summary.id);
  std::vector<nlohmann::json> records;
  std::vector<rl::Dropped> dropped;
  if (Status s =
          rl::build_rollouts(store.get(), summary.results, a.rollout_options, &records, &dropped);
      !s.ok())
    return fail(s);
  const fs::path out = a.out.empty() ? fs::path("rollouts-" + name + ".jsonl") : fs::path(a.out);
  if (Status s = rl::write_records(records, out, "python3", harness_dir() / "rl_parquet.py");
      !s.ok())
    return fail(s);
  std::cout << "rollout " << name << ": " << settings.suite_name << " (" << settings.tasks.size()
            << " tasks, " << settings.group_size << " episodes each) with " << settings.policy
            << " on " << settings.device << "\n\n"
            << report::format_metrics(report::compute_metrics(summary.results)) << "\n"
            << rl::format_rollout_summary(records, dropped, a.rollout_options)
            << "throughput: " << bench::format_throughput(summary.record) << "\n"
            << "rollouts: " << out.string() << " (" << records.size() << " episodes)\n";
  return kExitPass;
}

int BenchCommands::report(const std::string& store_path) {
  Args& a = *args_;
  std::unique_ptr<Store> store;
  if (Status s = open_run_store(store_path, &store); !s.ok()) return fail(s);
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
  if (Status s = open_run_store(store_path, &store); !s.ok()) return fail(s);
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
