#include "cli/rl_commands.h"

#include <iostream>

#include "agent/episode.h"
#include "agent/skill.h"
#include "agent/trajectory.h"
#include "bench/bench.h"
#include "cli/exit_status.h"
#include "cli/precision_flag.h"
#include "eval/reward.h"
#include "rl/export.h"
#include "rl/service.h"
#include "store/store.h"
#include "task/suite.h"
#include "task/task.h"
#include "util/files.h"
#include "util/paths.h"

namespace fs = std::filesystem;

namespace cuda_agent {

struct RlCommands::Args {
  CLI::App *exports = nullptr, *serve = nullptr;
  // export
  std::string kind;
  std::vector<std::string> runs;
  std::string out;
  rl::RolloutOptions rollout;
  rl::WarmupOptions warmup;
  std::string suite = "builtin";
  std::vector<std::string> filters;
  std::string device;
  int shrink = 1;
  // serve
  rl::ServiceOptions service;
  std::string gpus;
  double max_body_mb = 16;
  std::string work_root;
};

RlCommands::RlCommands(CLI::App* app, const std::string& default_device)
    : args_(std::make_unique<Args>()) {
  Args& a = *args_;
  a.device = default_device;
  a.service.device = default_device;

  a.exports = app->add_subcommand(
      "export",
      "data for RL trainers from the run store: rollouts of a rollout run, warm-up data by "
      "rejection sampling, or a suite's prompts (JSON Lines, or Parquet by the name .parquet)");
  a.exports
      ->add_option("kind", a.kind,
                   "rollouts: a rollout run's episodes with rewards, advantages and returns; "
                   "warmup: episodes with reward >= --min-reward for supervised fine-tuning; "
                   "prompts: verl RL dataset rows for a suite's tasks")
      ->required()
      ->check(CLI::IsMember({"rollouts", "warmup", "prompts"}));
  a.exports->add_option("runs", a.runs,
                        "rollouts: the run (b3); warmup: runs (b3) and episodes (r12) to draw "
                        "from (default: every episode in the store)");
  a.exports->add_option("--out", a.out, "the file to write: .jsonl or .parquet")->required();
  a.exports->add_option("--recipe", a.rollout.recipe, "reward recipe: " + recipe_names())
      ->capture_default_str();
  a.exports
      ->add_option("--advantage", a.rollout.estimator,
                   "rollouts: grpo or grpo_mean (rl/advantage.h)")
      ->check(CLI::IsMember({"grpo", "grpo_mean"}))
      ->capture_default_str();
  a.exports->add_option("--gamma", a.rollout.gamma, "rollouts: discount of the returns per turn")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  a.exports->add_option("--min-reward", a.warmup.min_reward, "warmup: the least reward kept")
      ->capture_default_str();
  a.exports->add_option("--per-task", a.warmup.per_task, "warmup: episodes kept per task at most")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  a.exports->add_option("--suite", a.suite, "prompts: a folder of tasks or a suite's name")
      ->capture_default_str();
  a.exports->add_option("--filter", a.filters, "prompts: only tasks whose id matches a pattern");
  a.exports->add_option("--device", a.device, "prompts: the device the episodes will run on")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  a.exports->add_option("--shrink", a.shrink, "prompts: the --shrink the episodes will run at")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();

  a.serve = app->add_subcommand(
      "serve",
      "the evaluation service for RL trainers: POST /v1/evaluate a candidate or /v1/rollout an "
      "episode, get the result and reward (HTTP, loopback by default)");
  rl::ServiceOptions& o = a.service;
  a.serve->add_option("--host", o.host, "address to listen on (loopback unless you say)")
      ->capture_default_str();
  a.serve->add_option("--port", o.port, "port to listen on (0: any free one, printed)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  a.serve->add_option("--suite", a.suite, "the tasks requests may name: a folder or a suite's name")
      ->capture_default_str();
  a.serve->add_option("--device", o.device, "cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  a.serve->add_option("--gpus", a.gpus, "cuda: the GPUs to use, e.g. 0,1,2,3 (default 0)");
  a.serve
      ->add_option("--jobs", o.jobs_per_device,
                   "pieces of work at once per GPU (their compiles overlap; each GPU verifies "
                   "and times one at a time); on the CPU, in all")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  a.serve->add_option("--queue", o.max_queue, "requests waiting beyond this get 503")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  a.serve->add_option("--max-body-mb", a.max_body_mb, "larger request bodies get 413")
      ->check(CLI::Range(0.001, 4096.0))
      ->capture_default_str();
  a.serve->add_option("--shrink", o.shrink, "divide the tasks' SCALABLE_SIZES by this by default")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  add_tf32_flag(a.serve, &o.precision, "by default (a request's \"precision\" says otherwise)",
                "the results record it");
  a.serve->add_option("--recipe", o.recipe, "default reward recipe: " + recipe_names())
      ->capture_default_str();
  a.serve->add_option("--evaluate-timeout", o.evaluate_timeout_s, "seconds per evaluation")
      ->check(CLI::Range(1.0, 1e7))
      ->capture_default_str();
  a.serve->add_option("--rollout-timeout", o.rollout_timeout_s, "seconds per episode")
      ->check(CLI::Range(1.0, 1e7))
      ->capture_default_str();
  a.serve->add_option("--work-dir", a.work_root,
                      "a folder per request (default ~/.cache/cuda-agent/serve)");
  a.serve->add_flag("--keep-work", o.keep_work, "keep each request's folder (files and logs)");
}

RlCommands::~RlCommands() = default;

bool RlCommands::chosen() const { return args_->exports->parsed() || args_->serve->parsed(); }

int RlCommands::run(const std::string& store_path) {
  return args_->exports->parsed() ? export_data(store_path) : serve(store_path);
}

namespace {

/// The trajectories of runs (bN: each episode of a bench or rollout run; rN: one episode), or
/// every one in the store when runs is empty.
Status gather_trajectories(Store* store, const std::vector<std::string>& runs,
                           std::vector<nlohmann::json>* trajectories) {
  if (runs.empty()) return store->list_trajectories(0, trajectories);
  trajectories->clear();
  auto add = [&](long long id) {
    nlohmann::json t;
    if (Status s = store->get_trajectory(id, &t); !s.ok()) return s;
    t["id"] = id;
    trajectories->push_back(std::move(t));
    return Status::OK();
  };
  for (const std::string& run : runs) {
    if (std::optional<long long> id = agent::parse_run_name(run)) {
      if (Status s = add(*id); !s.ok()) return s;
      continue;
    }
    nlohmann::json record;
    std::vector<report::TaskResult> results;
    if (Status s = bench::load_bench(store, run, &record, &results); !s.ok()) return s;
    for (const report::TaskResult& r : results) {
      if (std::optional<long long> id = agent::parse_run_name(r.run)) {
        if (Status s = add(*id); !s.ok()) return s;
      }
    }
  }
  return Status::OK();
}

}  // namespace

int RlCommands::export_data(const std::string& store_path) {
  Args& a = *args_;
  const fs::path parquet_writer = harness_dir() / "rl_parquet.py";
  std::vector<nlohmann::json> records;
  if (a.kind == "prompts") {
    Suite suite;
    if (Status s = find_suite(a.suite, &suite); !s.ok()) return fail(s);
    agent::Skill skill;
    if (Status s = agent::load_skill(harness_dir() / "workspace" / "SKILL.md", &skill); !s.ok())
      return fail(s);
    const std::string system = agent::system_prompt(skill, a.device);
    std::vector<SuiteTask> chosen;
    if (Status s = select_tasks(suite, a.filters, &chosen); !s.ok()) return fail(s);
    for (const SuiteTask& t : chosen) {
      Task task;
      if (Status s = load_task(t.path, &task); !s.ok()) return fail(s);
      records.push_back(rl::prompt_record(t.id, system,
                                          agent::task_message(task, a.device, a.shrink), a.device,
                                          a.shrink, static_cast<int>(records.size())));
    }
    if (Status s = rl::write_records(records, a.out, "python3", parquet_writer); !s.ok())
      return fail(s);
    std::cout << "prompts: " << records.size() << " tasks of " << suite.name << " for " << a.device
              << " -> " << a.out << "\n";
    return kExitPass;
  }
  std::unique_ptr<Store> store;
  if (Status s = open_run_store(store_path, &store); !s.ok()) return fail(s);
  if (a.kind == "rollouts") {
    if (a.runs.size() != 1) {
      return fail(Status::InvalidArgument("export rollouts takes one run (b3)"));
    }
    nlohmann::json record;
    std::vector<report::TaskResult> results;
    if (Status s = bench::load_bench(store.get(), a.runs[0], &record, &results); !s.ok())
      return fail(s);
    std::vector<rl::Dropped> dropped;
    if (Status s = rl::build_rollouts(store.get(), results, a.rollout, &records, &dropped); !s.ok())
      return fail(s);
    if (Status s = rl::write_records(records, a.out, "python3", parquet_writer); !s.ok())
      return fail(s);
    std::cout << rl::format_rollout_summary(records, dropped, a.rollout) << "-> " << a.out << "\n";
    return kExitPass;
  }
  std::vector<nlohmann::json> trajectories;
  if (Status s = gather_trajectories(store.get(), a.runs, &trajectories); !s.ok()) return fail(s);
  a.warmup.recipe = a.rollout.recipe;
  if (Status s = check_recipe(a.warmup.recipe); !s.ok()) return fail(s);
  rl::WarmupCounts counts;
  records = rl::select_warmup(trajectories, a.warmup, &counts);
  if (Status s = rl::write_records(records, a.out, "python3", parquet_writer); !s.ok())
    return fail(s);
  std::cout << "warmup: " << counts.kept << " of " << counts.considered << " episodes kept ("
            << counts.no_verdict << " without verdict, " << counts.below << " below reward "
            << a.warmup.min_reward << " (" << a.warmup.recipe << "), " << counts.duplicates
            << " duplicates, " << counts.over_cap << " over " << a.warmup.per_task << " a task) -> "
            << a.out << "\n";
  return kExitPass;
}

int RlCommands::serve(const std::string& store_path) {
  Args& a = *args_;
  rl::ServiceOptions o = a.service;
  Suite suite;
  if (Status s = find_suite(a.suite, &suite); !s.ok()) return fail(s);
  o.suite = suite.root;
  if (Status s = check_recipe(o.recipe); !s.ok()) return fail(s);
  o.gpus = bench::parse_gpus(a.gpus);
  o.max_body_bytes = static_cast<std::size_t>(a.max_body_mb * (1 << 20));
  o.binary = self_executable();
  o.store = store_path.empty() ? default_store_path() : fs::path(store_path);
  o.work_root = a.work_root.empty() ? default_cache_dir() / "serve" : fs::path(a.work_root);
  o.lock_dir = default_cache_dir() / "locks";
  o.log = [](const std::string& line) { std::cerr << "serve: " << line << "\n"; };
  rl::Service service(o);
  if (Status s = service.start(); !s.ok()) return fail(s);
  const int slots = (o.device == "cuda" ? static_cast<int>(o.gpus.size()) : 1) * o.jobs_per_device;
  std::cerr << "serve: " << suite.name << " (" << suite.tasks.size() << " tasks) on http://"
            << o.host << ":" << service.port() << " with " << slots << " slot(s) on " << o.device
            << "; store " << o.store.string() << "\n";
  if (o.host != "127.0.0.1" && o.host != "localhost" && o.host != "::1") {
    std::cerr << "serve: listening beyond loopback: whoever reaches " << o.host
              << " can have candidates run on this machine\n";
  }
  // The port on stdout, alone, for scripts that started the service with --port 0.
  std::cout << service.port() << std::endl;
  service.wait();
  std::cerr << "serve: stopped\n";
  return kExitPass;
}

}  // namespace cuda_agent
