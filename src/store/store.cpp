#include "store/store.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "util/files.h"

namespace cuda_agent {
namespace {

const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS workspaces (
  path TEXT PRIMARY KEY,
  task_path TEXT NOT NULL,
  task_sha256 TEXT NOT NULL,
  task_source TEXT NOT NULL,
  device TEXT NOT NULL,
  checksums TEXT NOT NULL,
  created TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
);
CREATE TABLE IF NOT EXISTS baselines (
  key TEXT PRIMARY KEY,
  record TEXT NOT NULL,
  created TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
);
CREATE TABLE IF NOT EXISTS tuning (
  pattern TEXT NOT NULL,
  shape_class TEXT NOT NULL,
  device TEXT NOT NULL,
  record TEXT NOT NULL,
  updated TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
  PRIMARY KEY (pattern, shape_class, device)
);
CREATE TABLE IF NOT EXISTS evaluations (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  task_id TEXT,
  task_sha256 TEXT,
  device TEXT,
  reward INTEGER,
  result TEXT NOT NULL,
  created TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
);
CREATE TABLE IF NOT EXISTS trajectories (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  task_id TEXT NOT NULL,
  policy TEXT NOT NULL,
  reward INTEGER,
  record TEXT NOT NULL,
  created TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
);
CREATE TABLE IF NOT EXISTS benches (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  record TEXT NOT NULL,
  created TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
);
CREATE TABLE IF NOT EXISTS bench_results (
  bench INTEGER NOT NULL,
  task TEXT NOT NULL,
  record TEXT NOT NULL,
  created TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
  PRIMARY KEY (bench, task)
);
)sql";

/// A prepared statement that finalizes itself.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) {
    rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  bool ok() const { return rc_ == SQLITE_OK; }
  void bind(int i, const std::string& text) {
    sqlite3_bind_text(stmt_, i, text.c_str(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  }
  void bind(int i, long long value) { sqlite3_bind_int64(stmt_, i, value); }
  int step() { return sqlite3_step(stmt_); }
  std::string text(int column) const {
    const unsigned char* p = sqlite3_column_text(stmt_, column);
    return p ? reinterpret_cast<const char*>(p) : "";
  }
  long long integer(int column) const { return sqlite3_column_int64(stmt_, column); }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  int rc_;
};

/// Steps st, whose first column is a JSON record, into *record (left empty when there is no
/// row). Returns SQLITE_ROW or SQLITE_DONE, SQLITE_MISMATCH when the text is not JSON, or the
/// step's error code.
int step_record(Statement& st, std::optional<nlohmann::json>* record) {
  const int rc = st.step();
  record->reset();
  if (rc != SQLITE_ROW) return rc;
  nlohmann::json parsed = nlohmann::json::parse(st.text(0), nullptr, false);
  if (parsed.is_discarded()) return SQLITE_MISMATCH;
  *record = std::move(parsed);
  return rc;
}

}  // namespace

constexpr int kBusyTimeoutMs = 30000;

std::filesystem::path default_store_path() {
  if (const char* env = std::getenv("CUDA_AGENT_STORE"); env && *env) return env;
  return default_cache_dir() / "store.sqlite";
}

Status Store::Open(const std::filesystem::path& path, std::unique_ptr<Store>* store) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    std::string message = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return Status::IoError("cannot open the run store " + path.string() + ": " + message);
  }
  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  std::unique_ptr<Store> opened(new Store(db, path));
  // Several processes opening a new store at once (a benchmark's parallel jobs) contend for the
  // switch to WAL and the schema, where SQLite can answer "database is locked" without waiting
  // in its busy handler: such a statement is tried again, for as long as the busy timeout.
  for (const char* sql : {"PRAGMA journal_mode=WAL;", kSchema}) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyTimeoutMs);
    for (int wait_ms = 2;; wait_ms = std::min(2 * wait_ms, 100)) {
      Status s = opened->exec(sql);
      if (s.ok()) break;
      const int code = sqlite3_errcode(db) & 0xff;
      if ((code != SQLITE_BUSY && code != SQLITE_LOCKED) ||
          std::chrono::steady_clock::now() > deadline)
        return s;
      std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
    }
  }
  *store = std::move(opened);
  return Status::OK();
}

Store::~Store() { sqlite3_close(db_); }

Status Store::error(const std::string& what) const {
  return Status::IoError("run store " + path_.string() + ": " + what + ": " + sqlite3_errmsg(db_));
}

Status Store::exec(const std::string& sql) {
  char* message = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
    std::string text = message ? message : "unknown error";
    sqlite3_free(message);
    return Status::IoError("run store " + path_.string() + ": " + text);
  }
  return Status::OK();
}

Status Store::put_workspace(const WorkspaceRecord& r) {
  Statement st(
      db_,
      "INSERT OR REPLACE INTO workspaces (path, task_path, task_sha256, task_source, device,"
      " checksums) VALUES (?, ?, ?, ?, ?, ?)");
  if (!st.ok()) return error("prepare");
  st.bind(1, r.path);
  st.bind(2, r.task_path);
  st.bind(3, r.task_sha256);
  st.bind(4, r.task_source);
  st.bind(5, r.device);
  st.bind(6, r.checksums.dump());
  if (st.step() != SQLITE_DONE) return error("record workspace");
  return Status::OK();
}

Status Store::get_workspace(const std::string& path, WorkspaceRecord* r) {
  Statement st(db_,
               "SELECT path, task_path, task_sha256, task_source, device, checksums FROM workspaces"
               " WHERE path = ?");
  if (!st.ok()) return error("prepare");
  st.bind(1, path);
  int rc = st.step();
  if (rc == SQLITE_DONE) {
    return Status::NotFound("workspace " + path + " was not laid out with the run store " +
                            path_.string() +
                            " (run `cuda-agent init`, or pass the --store it used)");
  }
  if (rc != SQLITE_ROW) return error("read workspace");
  r->path = st.text(0);
  r->task_path = st.text(1);
  r->task_sha256 = st.text(2);
  r->task_source = st.text(3);
  r->device = st.text(4);
  r->checksums = nlohmann::json::parse(st.text(5), nullptr, false);
  if (r->checksums.is_discarded()) return Status::Corruption("checksums of workspace " + path);
  return Status::OK();
}

Status Store::delete_workspace(const std::string& path) {
  Statement st(db_, "DELETE FROM workspaces WHERE path = ?");
  if (!st.ok()) return error("prepare");
  st.bind(1, path);
  if (st.step() != SQLITE_DONE) return error("forget workspace");
  return Status::OK();
}

Status Store::put_baseline(const std::string& key, const nlohmann::json& record) {
  Statement st(db_, "INSERT OR REPLACE INTO baselines (key, record) VALUES (?, ?)");
  if (!st.ok()) return error("prepare");
  st.bind(1, key);
  st.bind(2, record.dump());
  if (st.step() != SQLITE_DONE) return error("record baseline");
  return Status::OK();
}

Status Store::put_tuning(const TuningKey& key, const nlohmann::json& record) {
  Statement st(db_,
               "INSERT OR REPLACE INTO tuning (pattern, shape_class, device, record) "
               "VALUES (?, ?, ?, ?)");
  if (!st.ok()) return error("prepare");
  st.bind(1, key.pattern);
  st.bind(2, key.shape_class);
  st.bind(3, key.device);
  st.bind(4, record.dump());
  if (st.step() != SQLITE_DONE) return error("record tuning");
  return Status::OK();
}

Status Store::get_tuning(const TuningKey& key, std::optional<nlohmann::json>* record) {
  Statement st(db_,
               "SELECT record FROM tuning WHERE pattern = ? AND shape_class = ? AND device = ?");
  if (!st.ok()) return error("prepare");
  st.bind(1, key.pattern);
  st.bind(2, key.shape_class);
  st.bind(3, key.device);
  const int rc = step_record(st, record);
  if (rc == SQLITE_MISMATCH) return Status::Corruption("tuning record for " + key.pattern);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return error("read tuning");
  return Status::OK();
}

Status Store::last_device_name(const std::string& kind, std::optional<std::string>* name) {
  Statement st(db_,
               "SELECT json_extract(result, '$.device_name') AS name FROM evaluations "
               "WHERE device = ? AND name IS NOT NULL AND name != '' ORDER BY id DESC LIMIT 1");
  if (!st.ok()) return error("prepare");
  st.bind(1, kind);
  int rc = st.step();
  name->reset();
  if (rc == SQLITE_DONE) return Status::OK();
  if (rc != SQLITE_ROW) return error("read the last device");
  *name = st.text(0);
  return Status::OK();
}

Status Store::get_baseline(const std::string& key, std::optional<nlohmann::json>* record) {
  Statement st(db_, "SELECT record FROM baselines WHERE key = ?");
  if (!st.ok()) return error("prepare");
  st.bind(1, key);
  const int rc = step_record(st, record);
  if (rc == SQLITE_MISMATCH) return Status::Corruption("baseline " + key);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return error("read baseline");
  return Status::OK();
}

Status Store::has_baseline(const std::string& task_sha256, const std::string& impl,
                           const std::string& device, bool* found) {
  Statement st(db_,
               "SELECT 1 FROM baselines WHERE json_extract(record, '$.settings.task_sha256') = ? "
               "AND json_extract(record, '$.settings.impl') = ? "
               "AND json_extract(record, '$.settings.device') = ? LIMIT 1");
  if (!st.ok()) return error("prepare");
  st.bind(1, task_sha256);
  st.bind(2, impl);
  st.bind(3, device);
  const int rc = st.step();
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return error("look up baselines");
  *found = rc == SQLITE_ROW;
  return Status::OK();
}

Status Store::add_evaluation(const nlohmann::json& result, long long* id) {
  Statement st(db_,
               "INSERT INTO evaluations (task_id, task_sha256, device, reward, result)"
               " VALUES (?, ?, ?, ?, ?)");
  if (!st.ok()) return error("prepare");
  auto text = [&](const nlohmann::json::json_pointer& pointer) {
    return result.contains(pointer) && result[pointer].is_string()
               ? result[pointer].get<std::string>()
               : std::string();
  };
  st.bind(1, text("/task/id"_json_pointer));
  st.bind(2, text("/task/sha256"_json_pointer));
  st.bind(3, text("/device"_json_pointer));
  const auto reward = result.find("reward");
  if (reward != result.end() && reward->is_number_integer()) {
    st.bind(4, reward->get<long long>());
  }  // else the column stays NULL: no reward for a partial evaluation
  st.bind(5, result.dump());
  if (st.step() != SQLITE_DONE) return error("record evaluation");
  *id = sqlite3_last_insert_rowid(db_);
  return Status::OK();
}

Status Store::get_record(const char* sql, long long id, const std::string& name,
                         nlohmann::json* record) {
  Statement st(db_, sql);
  if (!st.ok()) return error("prepare");
  st.bind(1, id);
  if (st.step() != SQLITE_ROW) return Status::NotFound(name);
  *record = nlohmann::json::parse(st.text(0), nullptr, false);
  if (record->is_discarded()) return Status::Corruption(name);
  return Status::OK();
}

Status Store::get_evaluation(long long id, nlohmann::json* result) {
  return get_record("SELECT result FROM evaluations WHERE id = ?", id,
                    "evaluation " + std::to_string(id), result);
}

Status Store::count_evaluations(long long* count) {
  Statement st(db_, "SELECT COUNT(*) FROM evaluations");
  if (!st.ok() || st.step() != SQLITE_ROW) return error("count evaluations");
  *count = st.integer(0);
  return Status::OK();
}

Status Store::copy_baselines_from(const Store& other) {
  Statement attach(db_, "ATTACH DATABASE ? AS other");
  if (!attach.ok()) return error("prepare");
  attach.bind(1, other.path().string());
  if (attach.step() != SQLITE_DONE) return error("attach " + other.path().string());
  Status s = exec("INSERT OR IGNORE INTO main.baselines SELECT * FROM other.baselines");
  Status detached = exec("DETACH DATABASE other");
  return s.ok() ? detached : s;
}

Status Store::add_trajectory(const nlohmann::json& record, long long* id) {
  Statement st(db_,
               "INSERT INTO trajectories (task_id, policy, reward, record) VALUES (?, ?, ?, ?)");
  if (!st.ok()) return error("prepare");
  const nlohmann::json::json_pointer task("/task/id");
  st.bind(1, record.contains(task) && record[task].is_string() ? record[task].get<std::string>()
                                                               : std::string());
  st.bind(2, record.value("policy", std::string()));
  const auto reward = record.find("reward");
  if (reward != record.end() && reward->is_number_integer()) st.bind(3, reward->get<long long>());
  st.bind(4, record.dump());
  if (st.step() != SQLITE_DONE) return error("record trajectory");
  *id = sqlite3_last_insert_rowid(db_);
  return Status::OK();
}

Status Store::get_trajectory(long long id, nlohmann::json* record) {
  return get_record("SELECT record FROM trajectories WHERE id = ?", id,
                    "run r" + std::to_string(id), record);
}

Status Store::add_bench(const nlohmann::json& record, long long* id) {
  Statement st(db_, "INSERT INTO benches (record) VALUES (?)");
  if (!st.ok()) return error("prepare");
  st.bind(1, record.dump());
  if (st.step() != SQLITE_DONE) return error("record bench run");
  *id = sqlite3_last_insert_rowid(db_);
  return Status::OK();
}

Status Store::put_bench(long long id, const nlohmann::json& record) {
  Statement st(db_, "UPDATE benches SET record = ? WHERE id = ?");
  if (!st.ok()) return error("prepare");
  st.bind(1, record.dump());
  st.bind(2, id);
  if (st.step() != SQLITE_DONE) return error("update bench run");
  if (sqlite3_changes(db_) == 0) return Status::NotFound("bench run b" + std::to_string(id));
  return Status::OK();
}

Status Store::get_bench(long long id, nlohmann::json* record) {
  return get_record("SELECT record FROM benches WHERE id = ?", id,
                    "bench run b" + std::to_string(id), record);
}

Status Store::put_bench_result(long long bench, const std::string& task,
                               const nlohmann::json& record) {
  Statement st(db_, "INSERT OR REPLACE INTO bench_results (bench, task, record) VALUES (?, ?, ?)");
  if (!st.ok()) return error("prepare");
  st.bind(1, bench);
  st.bind(2, task);
  st.bind(3, record.dump());
  if (st.step() != SQLITE_DONE) return error("record the result of " + task);
  return Status::OK();
}

Status Store::list_bench_results(long long bench, std::vector<nlohmann::json>* results) {
  Statement st(db_, "SELECT record, task FROM bench_results WHERE bench = ? ORDER BY task");
  if (!st.ok()) return error("prepare");
  st.bind(1, bench);
  results->clear();
  std::optional<nlohmann::json> r;
  int rc;
  while ((rc = step_record(st, &r)) == SQLITE_ROW) results->push_back(std::move(*r));
  if (rc == SQLITE_MISMATCH) {
    return Status::Corruption("bench run b" + std::to_string(bench) + ", task " + st.text(1));
  }
  if (rc != SQLITE_DONE) return error("list bench results");
  return Status::OK();
}

Status Store::last_evaluation_id(long long* id) {
  Statement st(db_, "SELECT COALESCE(MAX(id), 0) FROM evaluations");
  if (!st.ok() || st.step() != SQLITE_ROW) return error("last evaluation");
  *id = st.integer(0);
  return Status::OK();
}

Status Store::list_records(const char* sql, long long after_id, const std::string& kind,
                           std::vector<nlohmann::json>* records) {
  Statement st(db_, sql);
  if (!st.ok()) return error("prepare");
  st.bind(1, after_id);
  records->clear();
  std::optional<nlohmann::json> r;
  int rc;
  while ((rc = step_record(st, &r)) == SQLITE_ROW) {
    if (!r->contains("id")) (*r)["id"] = st.integer(1);
    records->push_back(std::move(*r));
  }
  if (rc == SQLITE_MISMATCH) return Status::Corruption(kind + " " + std::to_string(st.integer(1)));
  if (rc != SQLITE_DONE) return error("list " + kind + "s");
  return Status::OK();
}

Status Store::list_evaluations(long long after_id, std::vector<nlohmann::json>* results) {
  return list_records("SELECT result, id FROM evaluations WHERE id > ? ORDER BY id", after_id,
                      "evaluation", results);
}

Status Store::list_trajectories(long long after_id, std::vector<nlohmann::json>* records) {
  return list_records("SELECT record, id FROM trajectories WHERE id > ? ORDER BY id", after_id,
                      "trajectory", records);
}

Status open_run_store(const std::string& path, std::unique_ptr<Store>* store) {
  return Store::Open(path.empty() ? default_store_path() : std::filesystem::path(path), store);
}

}  // namespace cuda_agent
