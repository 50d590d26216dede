/// The run store: one SQLite file that remembers what must outlive a command. Evaluation results
/// (every record, the moment it exists), measured baselines (so eager and torch.compile are timed
/// once per task, device, torch version and settings), the workspaces that were laid out, with
/// the checksums of their infrastructure files, and the synthesizer's tuning database (the
/// fastest launch configuration per kernel pattern, class of sizes and device), and the
/// trajectories of agent episodes, and benchmark runs with each task's result the moment it exists.
///
/// Several cuda-agent processes may share one store: it runs in WAL mode with a busy timeout.
#pragma once

#include <sqlite3.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "util/status.h"

namespace cuda_agent {

struct WorkspaceRecord {
  std::string path;  // canonical absolute path of the workspace folder
  std::string task_path;
  std::string task_sha256;
  std::string
      task_source;     // the reference is always run from this text, never the workspace's copy
  std::string device;  // "cpu" or "cuda"
  nlohmann::json checksums;  // relative path -> sha256 of every read-only infrastructure file
};

/// What a tuning winner is filed under: the kernel's pattern (its source's sha256), the class
/// of the task's sizes, and the device's name (a GPU model or a CPU).
struct TuningKey {
  std::string pattern;
  std::string shape_class;
  std::string device;
};

class Store {
 public:
  static Status Open(const std::filesystem::path& path, std::unique_ptr<Store>* store);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  Status put_workspace(const WorkspaceRecord& record);
  /// NotFound when the workspace was never laid out with this store.
  Status get_workspace(const std::string& path, WorkspaceRecord* record);
  /// Forgets a workspace (a scratch one, gone with its evaluation). Unknown paths are fine.
  Status delete_workspace(const std::string& path);

  Status put_baseline(const std::string& key, const nlohmann::json& record);
  /// Copies every baseline of other that this store lacks.
  Status copy_baselines_from(const Store& other);
  /// Empty when nothing is cached under key.
  Status get_baseline(const std::string& key, std::optional<nlohmann::json>* record);
  /// Whether any baseline of impl ("eager", "compile") is cached for the task on the device
  /// kind, whatever its other settings: known before the task has run on this machine.
  Status has_baseline(const std::string& task_sha256, const std::string& impl,
                      const std::string& device, bool* found);

  /// The tuner's winner for key: {"config", "label", "candidate_us", "evaluation", "tried"}.
  Status put_tuning(const TuningKey& key, const nlohmann::json& record);
  /// Empty when nothing was tuned under key.
  Status get_tuning(const TuningKey& key, std::optional<nlohmann::json>* record);
  /// The device name (a GPU model, a CPU) of the latest evaluation on device kind "cpu" or
  /// "cuda" that recorded one; empty when none did.
  Status last_device_name(const std::string& kind, std::optional<std::string>* name);
  Status add_evaluation(const nlohmann::json& result, long long* id);
  Status get_evaluation(long long id, nlohmann::json* result);
  Status count_evaluations(long long* count);
  /// The id of the latest evaluation (0 when there is none).
  Status last_evaluation_id(long long* id);
  /// Every evaluation with an id above after_id, oldest first (each with its "id").
  Status list_evaluations(long long after_id, std::vector<nlohmann::json>* results);

  /// An agent episode's trajectory (agent/trajectory.h), filed under a new run id.
  Status add_trajectory(const nlohmann::json& record, long long* id);
  /// NotFound when there is no run of that id.
  Status get_trajectory(long long id, nlohmann::json* record);
  /// Every trajectory with an id above after_id, oldest first (each with its "id").
  Status list_trajectories(long long after_id, std::vector<nlohmann::json>* records);

  /// A benchmark run's record (bench/bench.h), filed under a new id (named "b<id>").
  Status add_bench(const nlohmann::json& record, long long* id);
  /// Replaces the record of bench run id; NotFound when there is none.
  Status put_bench(long long id, const nlohmann::json& record);
  /// NotFound when there is no bench run of that id.
  Status get_bench(long long id, nlohmann::json* record);
  /// A task's result in a bench run, replacing any earlier one for the task.
  Status put_bench_result(long long bench, const std::string& task, const nlohmann::json& record);
  /// Every task result of a bench run, ordered by task id.
  Status list_bench_results(long long bench, std::vector<nlohmann::json>* results);

  const std::filesystem::path& path() const { return path_; }

 private:
  Store(sqlite3* db, std::filesystem::path path) : db_(db), path_(std::move(path)) {}
  Status exec(const std::string& sql);
  /// The JSON record that sql (one `?`, the id) selects; NotFound or Corruption naming it.
  Status get_record(const char* sql, long long id, const std::string& name, nlohmann::json* record);
  /// The JSON records (and ids) that sql selects above after_id (its one `?`); kind names them.
  Status list_records(const char* sql, long long after_id, const std::string& kind,
                      std::vector<nlohmann::json>* records);
  Status error(const std::string& what) const;
  sqlite3* db_;
  std::filesystem::path path_;
};

/// $CUDA_AGENT_STORE, else <cache dir>/store.sqlite.
std::filesystem::path default_store_path();

/// Opens the run store at path, or at default_store_path() when path is empty (--store unset).
Status open_run_store(const std::string& path, std::unique_ptr<Store>* store);

}  // namespace cuda_agent
