#include "bench/bench.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "agent/trajectory.h"
#include "eval/result.h"
#include "util/files.h"
#include "util/text.h"

namespace cuda_agent::bench {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string duration(double s) {
  char text[32];
  if (s < 60) {
    std::snprintf(text, sizeof text, "%.0fs", s);
  } else if (s < 3600) {
    std::snprintf(text, sizeof text, "%dm%02ds", static_cast<int>(s) / 60,
                  static_cast<int>(s) % 60);
  } else {
    std::snprintf(text, sizeof text, "%dh%02dm", static_cast<int>(s) / 3600,
                  static_cast<int>(s) % 3600 / 60);
  }
  return text;
}

std::string level_of(const std::string& task) {
  const std::size_t slash = task.find('/');
  return slash == std::string::npos ? "" : task.substr(0, slash);
}

/// The last line of an episode's stderr that says why it stopped ("cuda-agent: ..."), else its
/// last line.
std::string why_it_stopped(const std::string& err) {
  for (std::string_view line : split_lines(err, true)) {
    const std::string text = trim(std::string(line));
    if (text.rfind("cuda-agent: ", 0) == 0) return text.substr(12);
  }
  return trim(last_line(err));
}

}  // namespace

json BenchSettings::to_json() const {
  return {{"suite", suite.string()},
          {"suite_name", suite_name},
          {"policy", policy},
          {"device", device},
          {"shrink", shrink},
          {"tune", tune},
          {"policy_args", policy_args},
          {"tasks", tasks},
          {"task_timeout_s", task_timeout_s},
          {"group_size", group_size},
          {"precision", precision},
          {"fresh_baselines", fresh_baselines}};
}

Status BenchSettings::from_json(const json& j, BenchSettings* s) {
  try {
    s->suite = j.at("suite").get<std::string>();
    s->suite_name = j.value("suite_name", "");
    s->policy = j.at("policy").get<std::string>();
    s->device = j.at("device").get<std::string>();
    s->shrink = j.value("shrink", 1);
    s->tune = j.value("tune", "auto");
    s->policy_args = j.value("policy_args", std::vector<std::string>{});
    s->tasks = j.at("tasks").get<std::vector<std::string>>();
    s->task_timeout_s = j.value("task_timeout_s", 3600.0);
    s->group_size = j.value("group_size", 1);
    s->precision = j.value("precision", "fp32");
    s->fresh_baselines = j.value("fresh_baselines", false);
  } catch (const json::exception& e) {
    return Status::Corruption(std::string("a bench run's settings: ") + e.what());
  }
  return Status::OK();
}

std::vector<std::string> parse_gpus(const std::string& list) {
  std::vector<std::string> gpus;
  std::istringstream items(list);
  for (std::string gpu; std::getline(items, gpu, ',');) {
    if (!gpu.empty()) gpus.push_back(gpu);
  }
  if (gpus.empty()) gpus.push_back("0");
  return gpus;
}

LocalExecutor::LocalExecutor(std::string device, std::vector<std::string> gpus, int jobs,
                             std::filesystem::path lock_dir)
    : device_(std::move(device)),
      gpus_(std::move(gpus)),
      jobs_(jobs),
      lock_dir_(std::move(lock_dir)) {
  if (gpus_.empty()) gpus_.push_back("0");
}

int LocalExecutor::devices() const {
  return device_ == "cuda" ? static_cast<int>(gpus_.size()) : 1;
}

JobOutput LocalExecutor::run(int slot, const Job& job) {
  ProcessSpec spec;
  spec.argv = job.argv;
  spec.timeout_s = job.timeout_s;
  spec.isolate_network = false;  // an llm policy talks to its endpoint; evaluations isolate
  spec.parent_death_signal = SIGTERM;
  spec.term_grace_s = 30;  // an interrupted episode removes its evaluation's files first
  spec.stderr_path = job.log;
  spec.stdout_path = job.log.string() + ".json";
  spec.cancel = job.cancel;
  JobOutput out;
  if (device_ == "cuda") {
    const std::string& gpu = gpus_[slot % gpus_.size()];
    spec.env["CUDA_VISIBLE_DEVICES"] = gpu;
    spec.argv.insert(spec.argv.end(),
                     {"--device-lock", (lock_dir_ / ("gpu-" + gpu + ".lock")).string()});
    out.worker = "gpu " + gpu;
  } else {
    spec.argv.insert(spec.argv.end(), {"--device-lock", (lock_dir_ / "cpu.lock").string()});
    out.worker = "cpu job " + std::to_string(slot);
  }
  std::error_code ec;
  std::filesystem::create_directories(job.log.parent_path(), ec);
  PosixProcessRunner runner;
  ProcessResult r = runner.run(spec);
  out.started = r.started;
  out.exit_code = r.exit_code;
  out.timed_out = r.timed_out;
  out.interrupted = r.interrupted;
  out.cancelled = r.cancelled;
  out.wall_s = r.wall_s;
  (void)read_file(spec.stdout_path, &out.out);
  std::string err;
  (void)read_file(job.log, &err);
  out.error = why_it_stopped(err);
  if (out.error.empty() && !r.succeeded()) out.error = r.describe();
  if (!r.started) out.error = r.error;
  return out;
}

report::TaskResult parse_episode(const std::string& task, const std::string& level,
                                 const JobOutput& output) {
  report::TaskResult r;
  r.task = task;
  r.level = level;
  r.seconds = output.wall_s;
  r.worker = output.worker;
  const json record = json::parse(output.out, nullptr, false);
  if (output.timed_out) {
    r.outcome = "timeout";
    r.reason = "the episode ran past its limit of the task timeout";
    r.reward = -1;
    return r;
  }
  if (output.started && output.exit_code == kEpisodeNoCandidate) {
    r.outcome = "no_plan";
    r.reason = output.error.empty() ? "the policy wrote no candidate" : output.error;
    return r;
  }
  if (!output.started || (output.exit_code != 0 && output.exit_code != 1) || !record.is_object() ||
      !record.contains("outcome")) {
    r.outcome = "error";
    r.reason = output.error.empty() ? "the episode printed no result" : output.error;
    return r;
  }
  const EvalResult e = EvalResult::from_json(record);
  r.outcome = outcome_name(e.outcome);
  r.correct = e.correct && e.passed();
  r.reward = e.reward;
  r.eager_us = e.eager_us;
  r.compile_us = e.compile_us;
  r.candidate_us = e.candidate_us;
  r.speedup_vs_eager = e.speedup_vs_eager;
  r.speedup_vs_compile = e.speedup_vs_compile;
  r.reason = e.reason;
  r.device_name = e.device_name;
  r.evaluation = e.id;
  r.run = record.value("run", "");
  r.evaluations = record.value("evaluation_count", 1);
  return r;
}

std::string bench_name(long long id) {
  std::string name = std::to_string(id);
  name.insert(name.begin(), 'b');  // not "b" + ...: GCC 12 warns of a false overlap there
  return name;
}

std::optional<long long> parse_bench_name(const std::string& name) {
  if (auto id = parse_prefixed_id(name, 'b')) return id;
  if (!name.empty() && name.size() < 19 &&
      name.find_first_not_of("0123456789") == std::string::npos)
    return std::stoll(name);
  return std::nullopt;
}

Status load_bench(Store* store, const std::string& name, json* record,
                  std::vector<report::TaskResult>* results) {
  std::optional<long long> id = parse_bench_name(name);
  if (!id)
    return Status::InvalidArgument("not a bench run: " + name + " (they are named b1, b2, ...)");
  if (Status s = store->get_bench(*id, record); !s.ok()) {
    if (s.code() == Status::Code::kNotFound) {
      return Status::NotFound("no bench run " + bench_name(*id) + " in the run store " +
                              store->path().string());
    }
    return s;
  }
  std::vector<json> rows;
  if (Status s = store->list_bench_results(*id, &rows); !s.ok()) return s;
  results->clear();
  for (const json& row : rows) results->push_back(report::TaskResult::from_json(row));
  return Status::OK();
}

std::string format_throughput(const json& record) {
  const json t = record.value("throughput", json::object());
  const double hours = t.value("device_hours", 0.0);
  const int evaluations = t.value("evaluations", 0);
  char text[200];
  if (hours <= 0) return "no time recorded yet";
  std::snprintf(text, sizeof text,
                "%d candidates evaluated in %.2f device-hours (%s wall on %d device(s)): %.0f per "
                "device-hour",
                evaluations, hours, duration(t.value("wall_s", 0.0)).c_str(), t.value("devices", 1),
                evaluations / hours);
  return text;
}

Status run_bench(const BenchRequest& request, Store* store, Executor* executor,
                 BenchSummary* summary) {
  json record;
  BenchSettings settings;
  long long id = request.resume;
  if (id > 0) {
    if (Status s = store->get_bench(id, &record); !s.ok()) return s;
    if (Status s = BenchSettings::from_json(record.value("settings", json::object()), &settings);
        !s.ok())
      return s;
  } else {
    settings = request.settings;
    record = {{"schema", "cuda-agent.bench/1"}, {"settings", settings.to_json()},
              {"suite", settings.suite_name},   {"policy", settings.policy},
              {"device", settings.device},      {"shrink", settings.shrink},
              {"tune", settings.tune},          {"precision", settings.precision},
              {"created_at", agent::utc_now()}, {"sessions", json::array()}};
    if (Status s = store->add_bench(record, &id); !s.ok()) return s;
  }
  summary->id = id;
  std::vector<json> rows;
  if (Status s = store->list_bench_results(id, &rows); !s.ok()) return s;
  std::set<std::string> done;
  int passed = 0;
  for (const json& row : rows) {
    // An episode that ended in an error gave no verdict (the harness crashed, the device ran out
    // of memory): it runs again, its result replaced.
    if (row.value("outcome", "") == "error") continue;
    done.insert(report::TaskResult::from_json(row).key());
    passed += row.value("correct", false) ? 1 : 0;
  }
  // The episodes still to run: each the task and sample of the result it will file.
  std::vector<report::TaskResult> pending;
  for (const std::string& task : settings.tasks) {
    for (int k = 0; k < settings.group_size; ++k) {
      report::TaskResult episode;
      episode.task = task;
      episode.sample = settings.group_size > 1 ? k : -1;
      if (!done.count(episode.key())) pending.push_back(std::move(episode));
    }
  }
  const int total = static_cast<int>(settings.tasks.size()) * settings.group_size;
  const auto started = Clock::now();
  json session = {{"started_at", agent::utc_now()},
                  {"executor", executor->name()},
                  {"slots", executor->slots()},
                  {"devices", executor->devices()},
                  {"tasks_at_start", static_cast<int>(done.size())},
                  {"tasks_run", 0},
                  {"seconds", 0.0},
                  {"complete", false}};
  record["sessions"].push_back(session);
  const std::size_t session_index = record["sessions"].size() - 1;
  if (Status s = store->put_bench(id, record); !s.ok()) return s;

  const std::filesystem::path root = request.work_root / bench_name(id);
  std::mutex mu;
  std::condition_variable ticked;
  Status failure;
  int finished = static_cast<int>(done.size()), ran = 0, running = 0;
  std::size_t next = 0;
  bool stop = false;

  auto line = [&](const std::string& last) {  // mu held
    const int width = 24;
    const int fill = std::clamp(total ? width * finished / total : width, 0, width);
    std::string bar = "[" + std::string(fill, '#') + std::string(width - fill, '.') + "] ";
    std::string text = bar + std::to_string(finished) + "/" + std::to_string(total) +
                       (settings.group_size > 1 ? " episodes" : " tasks");
    if (finished > 0) {
      char pct[32];
      std::snprintf(pct, sizeof pct, " · pass %.1f%%", 100.0 * passed / finished);
      text += pct;
    }
    const double elapsed = seconds_since(started);
    if (ran > 0 && finished < total) {
      text += " · ~" + duration(elapsed / ran * (total - finished)) + " left";
    }
    text += " · " + duration(elapsed);
    if (running > 0) text += " · " + std::to_string(running) + " running";
    if (!last.empty()) text += " · " + last;
    return text;
  };

  // With mu held: no task starts after this; the status, if any, is the run's.
  auto halt = [&](Status why) {
    if (failure.ok()) failure = std::move(why);
    stop = true;
    ticked.notify_all();
  };
  auto worker = [&](int slot) {
    for (;;) {
      report::TaskResult episode;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (stop || next >= pending.size() || interrupt_requested()) return;
        episode = pending[next++];
        ++running;
      }
      const std::string& task = episode.task;
      const std::string key = episode.key();
      const std::filesystem::path dir = root / key;
      std::error_code ec;
      // A task interrupted before leaves its workspace behind: the episode starts afresh.
      std::filesystem::remove_all(dir, ec);
      std::filesystem::remove_all(dir.string() + ".private", ec);
      std::filesystem::create_directories(dir.parent_path(), ec);
      Job job;
      job.task = key;
      job.timeout_s = settings.task_timeout_s;
      job.log = root / "logs" / (key + ".log");
      job.argv = {request.binary.string(),
                  "--store",
                  request.store.string(),
                  "optimize",
                  (settings.suite / (task + ".py")).string(),
                  "--policy",
                  settings.policy,
                  "--json",
                  "--device",
                  settings.device,
                  "--shrink",
                  std::to_string(settings.shrink),
                  "--tune",
                  settings.tune,
                  "--workspace",
                  dir.string()};
      if (settings.precision == "tf32") job.argv.push_back("--tf32");
      if (settings.fresh_baselines)
        job.argv.insert(job.argv.end(), {"--baseline-scope", bench_name(id)});
      job.argv.insert(job.argv.end(), settings.policy_args.begin(), settings.policy_args.end());
      JobOutput output = executor->run(slot, job);
      std::lock_guard<std::mutex> lock(mu);
      --running;
      if (output.interrupted || interrupt_requested()) return halt(Status::OK());
      report::TaskResult result = parse_episode(task, level_of(task), output);
      result.sample = episode.sample;
      if (Status s = store->put_bench_result(id, key, result.to_json()); !s.ok()) return halt(s);
      ++finished;
      ++ran;
      passed += result.correct ? 1 : 0;
      // The session's time so far, so that a run killed later still counts it.
      record["sessions"][session_index]["tasks_run"] = ran;
      record["sessions"][session_index]["seconds"] = seconds_since(started);
      if (Status s = store->put_bench(id, record); !s.ok()) return halt(s);
      std::string last = key + " " + result.outcome;
      if (result.correct && result.speedup_vs_compile) {
        last += " " + report::format_ratio(result.speedup_vs_compile) + " vs compile";
      }
      last += " (" + duration(result.seconds) + ")";
      if (request.progress) request.progress(line(last), true);
      ticked.notify_all();
    }
  };

  if (request.progress) request.progress(line(pending.empty() ? "nothing left to run" : ""), false);
  std::vector<std::thread> threads;
  const int slots = std::max(1, std::min<int>(executor->slots(), pending.size()));
  for (int k = 0; k < slots && !pending.empty(); ++k) threads.emplace_back(worker, k);
  {
    // A refresh every two seconds on a terminal, so the clock moves while tasks run.
    std::unique_lock<std::mutex> lock(mu);
    while (running > 0 || (next < pending.size() && !stop && !interrupt_requested())) {
      ticked.wait_for(lock, std::chrono::seconds(2));
      if (request.tty && request.progress) request.progress(line(""), false);
      if (interrupt_requested()) stop = true;
    }
  }
  for (std::thread& t : threads) t.join();

  json& s = record["sessions"][session_index];
  s["ended_at"] = agent::utc_now();
  s["seconds"] = seconds_since(started);
  s["tasks_run"] = ran;
  s["complete"] = finished == total;
  if (Status st = store->list_bench_results(id, &rows); !st.ok()) return st;
  summary->results.clear();
  int evaluations = 0;
  for (const json& row : rows) {
    summary->results.push_back(report::TaskResult::from_json(row));
    evaluations += summary->results.back().evaluations;
  }
  double wall = 0, device_seconds = 0;
  int devices = 1;
  for (const json& sess : record["sessions"]) {
    wall += sess.value("seconds", 0.0);
    device_seconds += sess.value("seconds", 0.0) * sess.value("devices", 1);
    devices = std::max(devices, sess.value("devices", 1));
  }
  record["throughput"] = {{"evaluations", evaluations},
                          {"wall_s", wall},
                          {"devices", devices},
                          {"device_hours", device_seconds / 3600}};
  for (const auto& r : summary->results) {
    if (!r.device_name.empty()) record["device_name"] = r.device_name;
  }
  if (Status st = store->put_bench(id, record); !st.ok()) return st;
  summary->record = record;
  summary->ran = ran;
  summary->pending = total - finished;
  return failure;
}

}  // namespace cuda_agent::bench

// The Ray adapter is a child process with a pipe each way: jobs go down as JSON lines, outputs
// come back as JSON lines in any order, matched by id.
namespace cuda_agent::bench {

struct RayExecutor::Impl {
  pid_t pid = -1;
  int to_adapter = -1, from_adapter = -1;
  int slots = 1, devices = 1;
  std::thread reader;
  std::mutex mu;
  std::condition_variable arrived;
  std::map<long long, nlohmann::json> outputs;
  long long next_id = 1;
  bool closed = false;
  std::string buffer;

  /// One line from the adapter, or false at its end.
  bool read_line(std::string* line) {
    for (;;) {
      const std::size_t nl = buffer.find('\n');
      if (nl != std::string::npos) {
        *line = buffer.substr(0, nl);
        buffer.erase(0, nl + 1);
        return true;
      }
      char chunk[65536];
      const ssize_t n = ::read(from_adapter, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      buffer.append(chunk, n);
    }
  }

  void read_outputs() {
    std::string line;
    while (read_line(&line)) {
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_object() || !j.contains("id") || !j["id"].is_number_integer()) continue;
      const long long id = j["id"].get<long long>();
      std::lock_guard<std::mutex> lock(mu);
      outputs[id] = std::move(j);
      arrived.notify_all();
    }
    std::lock_guard<std::mutex> lock(mu);
    closed = true;
    arrived.notify_all();
  }

  void shut_down() {
    if (to_adapter >= 0) ::close(to_adapter);  // end of input: the adapter stops its actors
    to_adapter = -1;
    if (pid > 0) {
      int status = 0;
      for (int waited = 0; waited < 300; ++waited) {  // up to 30 s for Ray to stop
        if (::waitpid(pid, &status, WNOHANG) == pid) {
          pid = -1;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      if (pid > 0) {
        ::kill(-pid, SIGKILL);
        ::waitpid(pid, &status, 0);
      }
      pid = -1;
    }
    if (reader.joinable()) reader.join();
    if (from_adapter >= 0) ::close(from_adapter);
    from_adapter = -1;
  }
};

RayExecutor::RayExecutor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RayExecutor::~RayExecutor() { impl_->shut_down(); }

int RayExecutor::slots() const { return impl_->slots; }
int RayExecutor::devices() const { return impl_->devices; }

Status RayExecutor::Start(const Options& o, std::unique_ptr<RayExecutor>* executor) {
  int down[2], up[2];
  if (::pipe2(down, O_CLOEXEC) != 0 || ::pipe2(up, O_CLOEXEC) != 0) {
    return Status::IoError(std::string("cannot make pipes for the Ray adapter: ") +
                           std::strerror(errno));
  }
  std::vector<std::string> args = {o.python,        o.adapter.string(),
                                   "--address",     o.address,
                                   "--device",      o.device,
                                   "--workers",     std::to_string(o.workers),
                                   "--concurrency", std::to_string(o.concurrency)};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::error_code ec;
  if (!o.log.empty()) std::filesystem::create_directories(o.log.parent_path(), ec);
  const pid_t pid = ::fork();
  if (pid < 0) return Status::IoError(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    ::dup2(down[0], 0);
    ::dup2(up[1], 1);
    const int log = o.log.empty() ? -1 : ::open(o.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (log >= 0) ::dup2(log, 2);
    ::execvp(argv[0], argv.data());
    _exit(127);
  }
  ::close(down[0]);
  ::close(up[1]);
  auto impl = std::make_unique<Impl>();
  impl->pid = pid;
  impl->to_adapter = down[1];
  impl->from_adapter = up[0];
  // The first line says whether the actors were placed.
  std::string line;
  nlohmann::json hello;
  while (impl->read_line(&line)) {
    hello = nlohmann::json::parse(line, nullptr, false);
    if (hello.is_object() && (hello.contains("ready") || hello.contains("error"))) break;
  }
  if (!hello.is_object() || !hello.value("ready", false)) {
    const std::string why = hello.is_object() ? hello.value("error", "") : "";
    impl->shut_down();
    return Status::Internal("the Ray adapter did not start" +
                            (why.empty() ? std::string() : ": " + why) +
                            (o.log.empty() ? "" : " (its log: " + o.log.string() + ")"));
  }
  impl->slots = std::max(1, hello.value("slots", 1));
  impl->devices = std::max(1, hello.value("devices", 1));
  impl->reader = std::thread([p = impl.get()] { p->read_outputs(); });
  executor->reset(new RayExecutor(std::move(impl)));
  return Status::OK();
}

JobOutput RayExecutor::run(int slot, const Job& job) {
  Impl& p = *impl_;
  JobOutput out;
  long long id;
  {
    std::lock_guard<std::mutex> lock(p.mu);
    id = p.next_id++;
    const std::string line = nlohmann::json({{"id", id},
                                             {"slot", slot},
                                             {"argv", job.argv},
                                             {"timeout_s", job.timeout_s},
                                             {"log", job.log.string()}})
                                 .dump() +
                             "\n";
    if (p.closed || p.to_adapter < 0 ||
        ::write(p.to_adapter, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      out.error = "the Ray adapter is gone";
      return out;
    }
  }
  std::unique_lock<std::mutex> lock(p.mu);
  while (!p.outputs.count(id) && !p.closed) {
    p.arrived.wait_for(lock, std::chrono::milliseconds(200));
    if (interrupt_requested()) {
      out.interrupted = true;
      return out;
    }
  }
  if (!p.outputs.count(id)) {
    out.error = "the Ray adapter ended before the episode did";
    return out;
  }
  const nlohmann::json j = std::move(p.outputs[id]);
  p.outputs.erase(id);
  out.started = j.value("started", false);
  out.exit_code = j.value("exit_code", -1);
  out.timed_out = j.value("timed_out", false);
  out.wall_s = j.value("wall_s", 0.0);
  out.out = j.value("out", "");
  out.error = why_it_stopped(j.value("err", ""));
  if (out.error.empty()) out.error = j.value("error", "");
  out.worker = j.value("worker", "ray");
  return out;
}

}  // namespace cuda_agent::bench
