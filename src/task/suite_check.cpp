#include "task/suite_check.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "task/similarity.h"
#include "util/files.h"
#include "util/hash.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace cuda_agent {
namespace {

constexpr const char* kSchema = "cuda-agent.tasks-check/1";
constexpr const char* kScript = "task_check.py";
constexpr double kStartupAllowanceS = 300;  // before the first task: see task_check.py
constexpr auto kPoll = std::chrono::milliseconds(100);

struct Entry {
  const SuiteTask* task;
  std::string key;
};

/// The checker's own code is part of every key: a changed checker measures again.
std::string checker_version(const fs::path& harness_dir) {
  std::string code;
  for (const char* file :
       {kScript, "startup.py", "capture.py", "common.py", "check.py", "guard.py", "watch.py"}) {
    std::string text;
    if (read_file(harness_dir / file, &text).ok()) code += text;
  }
  return sha256_hex(code);
}

std::string settings_text(const SuiteCheckOptions& o, bool capture_only) {
  if (capture_only) return "capture";
  return "device=" + o.device + " shrink=" + std::to_string(o.shrink) +
         " timing=" + std::to_string(o.timing_budget_s);
}

/// Complete lines appended to a file since the last read.
class LineTail {
 public:
  explicit LineTail(fs::path path) : path_(std::move(path)) {}
  std::vector<json> read_new() {
    std::vector<json> records;
    std::ifstream in(path_);
    if (!in) return records;
    in.seekg(offset_);
    std::string line;
    while (std::getline(in, line)) {
      if (in.eof()) break;  // a line still being written
      offset_ += static_cast<std::streamoff>(line.size() + 1);
      json record = json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (record.is_object()) records.push_back(std::move(record));
    }
    return records;
  }

 private:
  fs::path path_;
  std::streamoff offset_ = 0;
};

std::string seconds(double s) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g s", s);
  return buffer;
}

std::string read_trimmed(const fs::path& path) {
  std::string text;
  if (!read_file(path, &text).ok()) return "";
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

/// Runs task_check.py processes and collects their records, restarting after a task that
/// crashes or hangs its process.
class Measurer {
 public:
  Measurer(const SuiteCheckOptions& options, ProcessRunner* runner, bool capture_only)
      : options_(options), runner_(runner), capture_only_(capture_only) {}

  /// Records already in the work folder, by key.
  void load_cache() {
    std::error_code ec;
    for (const auto& file : fs::directory_iterator(options_.work_dir, ec)) {
      if (file.path().extension() != ".jsonl") continue;
      LineTail tail(file.path());
      for (json& record : tail.read_new()) {
        if (!record.contains("key") || !record["key"].is_string()) continue;
        std::string key = record["key"].get<std::string>();
        cache_[key] = std::move(record);
      }
    }
  }

  bool cached(const std::string& key) const { return cache_.count(key) > 0; }
  const json& record(const std::string& key) const { return cache_.at(key); }

  /// Measures the entries not cached yet, in options_.jobs processes at once; on_record is
  /// called for each new record (under a lock).
  Status measure(const std::vector<Entry>& entries,
                 const std::function<void(const json&)>& on_record) {
    std::vector<Entry> pending;
    for (const Entry& e : entries) {
      if (!cached(e.key)) pending.push_back(e);
    }
    if (pending.empty()) return Status::OK();
    int jobs = std::max(1, std::min<int>(options_.jobs, static_cast<int>(pending.size())));
    std::vector<std::vector<Entry>> shares(jobs);
    for (std::size_t i = 0; i < pending.size(); ++i) shares[i % jobs].push_back(pending[i]);
    std::vector<std::future<Status>> workers;
    for (int k = 0; k < jobs; ++k) {
      workers.push_back(
          std::async(std::launch::async, [&, k] { return run_share(shares[k], k, on_record); }));
    }
    Status first = Status::OK();
    for (auto& w : workers) {
      Status s = w.get();
      if (!s.ok() && first.ok()) first = s;
    }
    return first;
  }

 private:
  Status run_share(std::vector<Entry> share, int worker,
                   const std::function<void(const json&)>& on_record) {
    int attempt = 0;
    std::error_code ec;
    while (!share.empty()) {
      if (interrupt_requested()) return Status::Internal("interrupted");
      char name_buffer[64];
      std::snprintf(name_buffer, sizeof name_buffer, "w%d-%d-%d%s", static_cast<int>(getpid()),
                    worker, attempt++, capture_only_ ? "-capture" : "");
      const std::string name = name_buffer;
      fs::path tasks_file = options_.work_dir / (name + ".tasks.json");
      fs::path results = options_.work_dir / (name + ".jsonl");
      fs::path progress = options_.work_dir / (name + ".progress");
      json list = json::array();
      for (const Entry& e : share) {
        list.push_back({{"path", e.task->path.string()}, {"key", e.key}});
      }
      Status s = write_file_atomic(tasks_file, list.dump());
      if (!s.ok()) return s;

      ProcessSpec spec;
      spec.argv = {options_.python,     (options_.harness_dir / kScript).string(),
                   "--device",          options_.device,
                   "--report",          (options_.work_dir / (name + ".report.json")).string(),
                   "--tasks",           tasks_file.string(),
                   "--results",         results.string(),
                   "--progress",        progress.string(),
                   "--shrink",          std::to_string(options_.shrink),
                   "--timing-budget-s", std::to_string(options_.timing_budget_s)};
      if (capture_only_) spec.argv.push_back("--capture-only");
      if (options_.device == "cuda" && options_.jobs > 1) {
        spec.argv.push_back("--gpu-lock");
        spec.argv.push_back((options_.work_dir / "gpu.lock").string());
      }
      spec.timeout_s = kStartupAllowanceS + options_.task_timeout_s * share.size();
      spec.stdout_path = options_.work_dir / (name + ".log");
      spec.stderr_path = spec.stdout_path;
      spec.cancel = std::make_shared<std::atomic<bool>>(false);

      auto process = std::async(std::launch::async, [&] { return runner_->run(spec); });
      LineTail tail(results);
      std::set<std::string> done;
      std::string current;
      auto since = std::chrono::steady_clock::now();
      bool hung = false;
      auto drain = [&] {
        for (json& record : tail.read_new()) {
          done.insert(record.value("key", ""));
          deliver(std::move(record), on_record);
        }
      };
      while (process.wait_for(kPoll) != std::future_status::ready) {
        drain();
        std::string index = read_trimmed(progress);
        auto now = std::chrono::steady_clock::now();
        if (index != current) {
          current = index;
          since = now;
        }
        // Start-up (interpreter, torch, the device, torch.compile's first call) comes before
        // the first task's index appears.
        double limit = options_.task_timeout_s + (current.empty() ? kStartupAllowanceS : 0);
        if (std::chrono::duration<double>(now - since).count() > limit) {
          hung = true;
          spec.cancel->store(true);
        }
      }
      ProcessResult result = process.get();
      drain();
      current = read_trimmed(progress);
      for (const fs::path& p :
           {tasks_file, progress, options_.work_dir / (name + ".report.json")}) {
        fs::remove(p, ec);
      }
      if (result.succeeded()) fs::remove(spec.stdout_path, ec);
      if (!result.started) {
        return Status::Internal("cannot start the task checker: " + result.error);
      }
      if (result.interrupted) return Status::Internal("interrupted");

      // The first task without a record is the one the process ended on.
      std::size_t next = 0;
      while (next < share.size() && done.count(share[next].key)) ++next;
      if (next == share.size()) break;
      bool before_first = current.empty();
      if (before_first && !hung) {
        std::string log;
        read_file(spec.stdout_path, &log);
        return Status::Internal("the task checker " + result.describe() +
                                " before its first task; its output:\n" + log);
      }
      json failure = {
          {"key", share[next].key},
          {"path", share[next].task->path.string()},
          {"ok", false},
          {"stage", hung ? "timeout" : "crash"},
          {"error", hung ? "ran past the per-task limit of " + seconds(options_.task_timeout_s)
                         : "the checking process " + result.describe()}};
      std::ofstream(results, std::ios::app) << failure.dump() << "\n";
      deliver(std::move(failure), on_record);
      share.erase(share.begin(), share.begin() + static_cast<long>(next) + 1);
    }
    return Status::OK();
  }

  void deliver(json record, const std::function<void(const json&)>& on_record) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string key = record.value("key", "");
    cache_[key] = std::move(record);
    if (on_record) on_record(cache_[key]);
  }

  const SuiteCheckOptions& options_;
  ProcessRunner* runner_;
  bool capture_only_;
  std::map<std::string, json> cache_;
  std::mutex mutex_;
};

struct Reference {
  std::string id;
  GraphSignature signature;
};

/// One entry per task of suite, keyed by the checker's version, the settings and the task's text.
Status make_entries(const Suite& suite, const SuiteCheckOptions& options, bool capture_only,
                    const std::string& version, std::vector<Entry>* entries) {
  for (const SuiteTask& task : suite.tasks) {
    std::string source;
    if (Status s = read_file(task.path, &source); !s.ok()) return s;
    entries->push_back(
        {&task, sha256_hex(version + "\n" + settings_text(options, capture_only) + "\n" + source)});
  }
  return Status::OK();
}

Status reference_signatures(const SuiteCheckOptions& options, ProcessRunner* runner,
                            const std::string& version, std::vector<Reference>* references) {
  Measurer measurer(options, runner, /*capture_only=*/true);
  measurer.load_cache();  // once for every reference suite
  for (const fs::path& dir : options.reference_dirs) {
    Suite suite;
    std::vector<Entry> entries;
    Status s = load_suite(dir, &suite);
    if (s.ok()) s = make_entries(suite, options, /*capture_only=*/true, version, &entries);
    if (s.ok()) s = measurer.measure(entries, nullptr);
    if (!s.ok()) return s;
    for (const Entry& e : entries) {
      const json& record = measurer.record(e.key);
      if (record.contains("graph")) {
        references->push_back({suite.name + ":" + e.task->id, graph_signature(record["graph"])});
      }
    }
  }
  return Status::OK();
}

TaskVerdict judge(const SuiteTask& task, const json& record, const SuiteCheckOptions& options,
                  const std::vector<Reference>& references) {
  TaskVerdict verdict;
  verdict.task = task;
  verdict.reasons = judge_task(record, options.policy);
  if (record.contains("graph") && !references.empty()) {
    GraphSignature own = graph_signature(record["graph"]);
    for (const Reference& ref : references) {
      double score = graph_similarity(own, ref.signature);
      if (score > verdict.similarity) {
        verdict.similarity = score;
        verdict.similar_to = ref.id;
      }
    }
    if (verdict.similarity >= options.max_similarity) {
      char score[16];
      std::snprintf(score, sizeof score, "%.2f", verdict.similarity);
      verdict.reasons.push_back(
          {"too_similar", "its graph matches " + verdict.similar_to + " with similarity " + score});
    }
  }
  verdict.kept = verdict.reasons.empty();
  verdict.measurement = record;
  verdict.measurement.erase("graph");
  return verdict;
}

}  // namespace

int SuiteCheckReport::kept() const {
  int n = 0;
  for (const auto& v : verdicts) n += v.kept ? 1 : 0;
  return n;
}

json SuiteCheckReport::to_json() const {
  json tasks = json::array(), kept_ids = json::array(), dropped = json::array();
  for (const TaskVerdict& v : verdicts) {
    json reasons = json::array();
    for (const DropReason& r : v.reasons)
      reasons.push_back({{"name", r.name}, {"detail", r.detail}});
    json entry = {{"id", v.task.id}, {"level", v.task.level}, {"path", v.task.path.string()},
                  {"kept", v.kept},  {"reasons", reasons},    {"measurement", v.measurement}};
    if (!v.similar_to.empty()) {
      entry["most_similar"] = {{"task", v.similar_to}, {"similarity", v.similarity}};
    }
    tasks.push_back(entry);
    if (v.kept) {
      kept_ids.push_back(v.task.id);
    } else {
      dropped.push_back({{"id", v.task.id}, {"reasons", reasons}});
    }
  }
  json window = policy.check_window ? json::array({policy.window_min_ms, policy.window_max_ms})
                                    : json(nullptr);
  return {{"schema", kSchema},          {"suite", suite},     {"device", device},
          {"device_name", device_name}, {"shrink", shrink},   {"window_ms", window},
          {"kept", kept_ids},           {"dropped", dropped}, {"tasks", tasks}};
}

Status check_suite(const Suite& suite, const SuiteCheckOptions& options, ProcessRunner* runner,
                   SuiteCheckReport* report) {
  if (options.shrink < 1) return Status::InvalidArgument("--shrink must be at least 1");
  if (options.jobs < 1) return Status::InvalidArgument("--jobs must be at least 1");
  std::error_code ec;
  fs::create_directories(options.work_dir, ec);
  if (ec) {
    return Status::IoError("cannot create " + options.work_dir.string() + ": " + ec.message());
  }
  std::string version = checker_version(options.harness_dir);
  std::vector<Reference> references;
  Status s = reference_signatures(options, runner, version, &references);
  if (!s.ok()) return s;

  std::vector<Entry> entries;
  s = make_entries(suite, options, /*capture_only=*/false, version, &entries);
  if (!s.ok()) return s;
  std::map<std::string, const SuiteTask*> by_key;
  for (const Entry& e : entries) by_key[e.key] = e.task;

  Measurer measurer(options, runner, /*capture_only=*/false);
  measurer.load_cache();
  int total = static_cast<int>(entries.size()), done = 0;
  auto announce = [&](const json& record) {
    auto it = by_key.find(record.value("key", ""));
    if (it == by_key.end() || !options.on_verdict) return;
    options.on_verdict(judge(*it->second, record, options, references), ++done, total);
  };
  for (const Entry& e : entries) {
    if (measurer.cached(e.key)) announce(measurer.record(e.key));
  }
  s = measurer.measure(entries, announce);
  if (!s.ok()) return s;

  report->suite = suite.name;
  report->device = options.device;
  report->shrink = options.shrink;
  report->policy = options.policy;
  report->verdicts.clear();
  for (const Entry& e : entries) {
    const json& record = measurer.record(e.key);
    report->verdicts.push_back(judge(*e.task, record, options, references));
  }
  for (const TaskVerdict& v : report->verdicts) {
    if (v.measurement.contains("device_name")) {
      report->device_name = v.measurement["device_name"].get<std::string>();
      break;
    }
  }
  return Status::OK();
}

}  // namespace cuda_agent
