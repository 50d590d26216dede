/// Benchmark runs: every task of a suite through a policy, each task one episode in a process of
/// its own (`cuda-agent optimize --json`), several at once. Compiles and graph captures run in
/// parallel; evaluations sharing a device take turns on it through a lock file per GPU, so each
/// GPU verifies and times one candidate at a time. The run store records each task's result the
/// moment it exists: a run that was interrupted, or killed, resumes where it stopped.
///
/// Where the episodes run is an Executor: processes on this machine (LocalExecutor), or Ray
/// actors, one per GPU, started by harness/ray_workers.py (RayExecutor).
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "report/metrics.h"
#include "sandbox/process_runner.h"
#include "store/store.h"
#include "util/status.h"

namespace cuda_agent::bench {

/// What a bench run is: fixed when it is created, recorded with it, and used again on --resume.
struct BenchSettings {
  std::filesystem::path suite;  // the suite's folder
  std::string suite_name;
  std::string policy = "synth";
  std::string device = "cpu";
  int shrink = 1;
  std::string tune = "auto";
  /// The policy's own options, passed to each episode (--endpoint URL --model NAME ...).
  std::vector<std::string> policy_args;
  std::vector<std::string> tasks;  // the suite's task ids this run covers
  double task_timeout_s = 3600;    // one task's episode, all its evaluations included
  /// Episodes per task. Above 1 (a rollout's group), each task's episodes are results of their
  /// own, keyed "task#k" for k = 0..group_size-1.
  int group_size = 1;
  /// The episodes' evaluations' precision (EvalOptions::precision): fp32, or tf32 (--tf32).
  std::string precision = "fp32";
  /// Eager and torch.compile timed afresh in this run, once a task (EvalOptions::baseline_scope
  /// is the run's name), rather than taken from the store where an earlier run timed them.
  bool fresh_baselines = false;

  nlohmann::json to_json() const;
  static Status from_json(const nlohmann::json& j, BenchSettings* settings);
};

/// One episode to run somewhere: `cuda-agent optimize ... --json` without the options that only
/// the place it runs can know (the device lock, the GPU).
struct Job {
  std::string task;  // its result's key (TaskResult::key)
  std::vector<std::string> argv;
  double timeout_s = 3600;
  std::filesystem::path log;  // where its stderr goes (the episode's progress lines)
  /// Set to true to stop the job (SIGTERM, then its process group killed 30 s later); local only.
  std::shared_ptr<std::atomic<bool>> cancel;
};

struct JobOutput {
  bool started = false;
  int exit_code = -1;
  bool timed_out = false;
  bool interrupted = false;  // the bench was stopped: no verdict, the task runs again on resume
  bool cancelled = false;    // stopped through Job::cancel
  double wall_s = 0;
  std::string out;     // what the episode printed on stdout (its JSON record)
  std::string error;   // why it could not run, or how it ended ("killed by signal 9")
  std::string worker;  // where it ran
};

class Executor {
 public:
  virtual ~Executor() = default;
  /// How many episodes may run at once.
  virtual int slots() const = 0;
  /// Runs job in slot (0 <= slot < slots()), one job per slot at a time, and waits for it.
  virtual JobOutput run(int slot, const Job& job) = 0;
  /// "local" or "ray", for the run's record.
  virtual std::string name() const = 0;
  /// The devices the episodes use, for the throughput (GPUs; 1 on the CPU).
  virtual int devices() const = 0;
};

/// The GPUs a --gpus list names ("0,1,3"), or {"0"} when it names none.
std::vector<std::string> parse_gpus(const std::string& list);

/// Episodes as processes on this machine: `jobs` at once over the given GPUs (cuda: slot k uses
/// GPU gpus[k % n] through CUDA_VISIBLE_DEVICES and that GPU's lock file under lock_dir; cpu:
/// one lock for the machine).
class LocalExecutor : public Executor {
 public:
  LocalExecutor(std::string device, std::vector<std::string> gpus, int jobs,
                std::filesystem::path lock_dir);
  int slots() const override { return jobs_; }
  JobOutput run(int slot, const Job& job) override;
  std::string name() const override { return "local"; }
  int devices() const override;

 private:
  std::string device_;
  std::vector<std::string> gpus_;
  int jobs_;
  std::filesystem::path lock_dir_;
};

/// Episodes on Ray actors: harness/ray_workers.py connects to the cluster at address ("local"
/// starts one on this machine), places `workers` actors (one GPU each on cuda) that run
/// `concurrency` episodes each, and relays jobs and their outputs as JSON lines.
class RayExecutor : public Executor {
 public:
  struct Options {
    std::string python = "python3";
    std::filesystem::path adapter;  // harness/ray_workers.py
    std::string address = "local";
    std::string device = "cpu";
    int workers = 1;
    int concurrency = 2;
    std::filesystem::path log;  // the adapter's and Ray's own output
  };
  /// Starts the adapter and waits until its actors are placed.
  static Status Start(const Options& options, std::unique_ptr<RayExecutor>* executor);
  ~RayExecutor() override;
  int slots() const override;
  JobOutput run(int slot, const Job& job) override;
  std::string name() const override { return "ray"; }
  int devices() const override;

 private:
  struct Impl;
  explicit RayExecutor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// The exit status of an episode (`cuda-agent optimize`) whose policy wrote no candidate: the
/// synthesizer has no plan for the task's ops (cli/exit_status.h's kExitNoCandidate).
constexpr int kEpisodeNoCandidate = 3;

/// A task's result from its episode's output: its evaluation's outcome; "no_plan" where the
/// policy wrote no candidate; "error" where the episode reached no verdict otherwise (it crashed,
/// the device ran out of memory), which a resumed run tries again; "timeout".
report::TaskResult parse_episode(const std::string& task, const std::string& level,
                                 const JobOutput& output);

struct BenchRequest {
  long long resume = 0;  // 0: a new run with settings
  BenchSettings settings;
  std::filesystem::path binary;     // this cuda-agent
  std::filesystem::path store;      // the run store the episodes write to
  std::filesystem::path work_root;  // workspaces go to work_root/b<id>/<task id>
  /// A progress line (a bar, tasks done of all, pass rate so far, time left, episodes running,
  /// the last task's outcome): with task_done after each task, and, when tty, every 2 s too.
  std::function<void(const std::string& line, bool task_done)> progress;
  bool tty = false;
};

struct BenchSummary {
  long long id = 0;
  int ran = 0;      // tasks finished in this session
  int pending = 0;  // tasks still without a result (interrupted)
  nlohmann::json record;
  std::vector<report::TaskResult> results;
};

/// Runs (or resumes) a bench run to the end, or until interrupted. Each result is in the store
/// when this returns, whatever the ending.
Status run_bench(const BenchRequest& request, Store* store, Executor* executor,
                 BenchSummary* summary);

/// "b12" and back.
std::string bench_name(long long id);
std::optional<long long> parse_bench_name(const std::string& name);

/// A bench run's record and results from the store.
Status load_bench(Store* store, const std::string& name, nlohmann::json* record,
                  std::vector<report::TaskResult>* results);

/// Candidates evaluated per GPU-hour over the run's sessions: "N candidates in H h on G
/// device(s): X per device-hour".
std::string format_throughput(const nlohmann::json& record);

}  // namespace cuda_agent::bench
