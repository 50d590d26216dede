#include "rl/service.h"

#include <httplib.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <regex>
#include <set>
#include <thread>

#include "agent/trajectory.h"
#include "bench/bench.h"
#include "eval/result.h"
#include "eval/reward.h"
#include "sandbox/process_runner.h"
#include "store/store.h"
#include "task/suite.h"
#include "util/files.h"

namespace cuda_agent::rl {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

constexpr std::size_t kMaxFiles = 256;

/// A path a candidate may hand in: model_new.py, or a relative path beneath kernels/ without
/// "..", empty or hidden parts.
bool candidate_path(const std::string& path) {
  if (path == "model_new.py") return true;
  static const std::regex allowed(R"(kernels(/[A-Za-z0-9_][A-Za-z0-9_.+-]*)+)");
  if (!std::regex_match(path, allowed)) return false;
  return path.find("/..") == std::string::npos;
}

bool environment_name(const std::string& name) {
  static const std::regex allowed("[A-Za-z_][A-Za-z0-9_]*");
  return std::regex_match(name, allowed);
}

std::string seconds_text(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.0f", s);
  return text;
}

}  // namespace

Status parse_work_request(const std::string& kind, const std::string& body,
                          const std::map<std::string, fs::path>& tasks,
                          const ServiceOptions& options, WorkRequest* r) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::InvalidArgument("the body is not a JSON object");
  }
  *r = WorkRequest{};
  r->kind = kind;
  const auto task = j.find("task");
  if (task == j.end() || !task->is_string()) {
    return Status::InvalidArgument("\"task\" must be a task id of the suite (GET /v1/tasks)");
  }
  r->task = task->get<std::string>();
  const auto known = tasks.find(r->task);
  if (known == tasks.end()) {
    return Status::InvalidArgument("no task \"" + r->task + "\" in the suite (GET /v1/tasks)");
  }
  r->task_path = known->second;
  const json recipe = j.value("recipe", json(options.recipe));
  if (!recipe.is_string()) {
    return Status::InvalidArgument("\"recipe\" must be one of: " + recipe_names());
  }
  r->recipe = recipe.get<std::string>();
  if (Status s = check_recipe(r->recipe); !s.ok()) return s;
  const json shrink = j.value("shrink", json(options.shrink));
  if (!shrink.is_number_integer() || shrink.get<long long>() < 1 ||
      shrink.get<long long>() > (1 << 20)) {
    return Status::InvalidArgument("\"shrink\" must be an integer from 1 to 1048576");
  }
  r->shrink = shrink.get<int>();
  const json precision = j.value("precision", json(options.precision));
  if (precision != "fp32" && precision != "tf32") {
    return Status::InvalidArgument("\"precision\" must be \"fp32\" or \"tf32\"");
  }
  r->precision = precision.get<std::string>();
  if (kind == "evaluate") {
    const auto files = j.find("files");
    if (files == j.end() || !files->is_object()) {
      return Status::InvalidArgument(
          "\"files\" must be an object of path -> text: model_new.py and kernels/...");
    }
    if (files->size() > kMaxFiles) {
      return Status::InvalidArgument("more than " + std::to_string(kMaxFiles) + " files");
    }
    for (const auto& [path, text] : files->items()) {
      if (!candidate_path(path)) {
        return Status::InvalidArgument("file \"" + path +
                                       "\" is not model_new.py or a file beneath kernels/");
      }
      if (!text.is_string()) {
        return Status::InvalidArgument("file \"" + path + "\" must be text (a JSON string)");
      }
      r->files[path] = text.get<std::string>();
    }
    if (!r->files.count("model_new.py")) {
      return Status::InvalidArgument("\"files\" has no model_new.py");
    }
    return Status::OK();
  }
  for (const char* key : {"endpoint", "model"}) {
    const auto v = j.find(key);
    if (v == j.end() || !v->is_string() || v->get<std::string>().empty()) {
      return Status::InvalidArgument(std::string("a rollout needs \"") + key + "\"");
    }
  }
  r->endpoint = j["endpoint"].get<std::string>();
  r->model = j["model"].get<std::string>();
  if (r->endpoint.rfind("http://", 0) != 0 && r->endpoint.rfind("https://", 0) != 0) {
    return Status::InvalidArgument("\"endpoint\" must be an http:// or https:// URL");
  }
  const json turns = j.value("max_turns", json(0));
  if (!turns.is_number_integer() || turns.get<long long>() < 0 || turns.get<long long>() > 10000) {
    return Status::InvalidArgument("\"max_turns\" must be an integer from 1 to 10000");
  }
  r->max_turns = turns.get<int>();
  if (j.contains("temperature")) {
    if (!j["temperature"].is_number() || j["temperature"].get<double>() < 0) {
      return Status::InvalidArgument("\"temperature\" must be a number, 0 or more");
    }
    r->temperature = j["temperature"].get<double>();
  }
  if (j.contains("api_key_env")) {
    if (!j["api_key_env"].is_string() || !environment_name(j["api_key_env"])) {
      return Status::InvalidArgument("\"api_key_env\" must name an environment variable");
    }
    r->api_key_env = j["api_key_env"].get<std::string>();
  }
  return Status::OK();
}

std::vector<std::string> work_argv(const WorkRequest& r, const ServiceOptions& o,
                                   const fs::path& dir) {
  std::vector<std::string> argv = {o.binary.string(), "--store", o.store.string()};
  if (r.kind == "evaluate") {
    argv.insert(argv.end(), {"eval", "--task", r.task_path.string(), "--candidate",
                             (dir / "candidate" / "model_new.py").string()});
    bool kernels = false;
    for (const auto& [path, text] : r.files) kernels = kernels || path != "model_new.py";
    if (kernels) argv.insert(argv.end(), {"--kernels", (dir / "candidate" / "kernels").string()});
  } else {
    argv.insert(argv.end(),
                {"optimize", r.task_path.string(), "--policy", "llm", "--endpoint", r.endpoint,
                 "--model", r.model, "--workspace", (dir / "workspace").string()});
    if (r.max_turns > 0) argv.insert(argv.end(), {"--max-turns", std::to_string(r.max_turns)});
    if (r.temperature) {
      char t[32];
      std::snprintf(t, sizeof t, "%.17g", *r.temperature);
      argv.insert(argv.end(), {"--temperature", t});
    }
    if (!r.api_key_env.empty()) argv.insert(argv.end(), {"--api-key-env", r.api_key_env});
  }
  argv.insert(argv.end(), {"--json", "--device", o.device, "--shrink", std::to_string(r.shrink)});
  if (r.precision == "tf32") argv.push_back("--tf32");
  return argv;
}

namespace {

/// One piece of work: what the request asked, and its answer once there is one.
struct Work {
  long long id = 0;
  WorkRequest request;
  fs::path dir;
  std::shared_ptr<std::atomic<bool>> cancel = std::make_shared<std::atomic<bool>>(false);
  std::mutex mu;
  std::condition_variable answered;
  bool done = false;
  std::string body;
};

}  // namespace

struct Service::Impl {
  explicit Impl(ServiceOptions o) : options(std::move(o)) {}

  ServiceOptions options;
  httplib::Server server;
  std::string suite_name;
  std::map<std::string, fs::path> tasks;
  std::unique_ptr<bench::LocalExecutor> executor;
  std::unique_ptr<Store> store;
  int bound_port = 0;
  fs::path work_dir;  // options.work_root/<port>: services on one machine keep apart
  std::atomic<bool> stopping{false};

  std::mutex mu;  // guards everything below
  std::condition_variable slot_freed, work_ended;
  std::set<std::shared_ptr<Work>> active;  // accepted and not yet answered
  std::vector<bool> busy;
  int queued = 0, running = 0, live = 0;
  long long next_id = 1;
  std::map<std::pair<std::string, int>, long long> requests;  // (endpoint, code) -> count
  std::map<std::string, long long> finished, cancelled, no_verdict;
  std::map<std::string, double> work_seconds;

  void log(const std::string& line) {
    if (options.log) options.log(line);
  }

  void count(const std::string& endpoint, int code) {
    std::lock_guard<std::mutex> lock(mu);
    ++requests[{endpoint, code}];
  }

  void reply(httplib::Response& res, const std::string& endpoint, int code, const json& body) {
    res.status = code;
    res.set_content(body.dump() + "\n", "application/json");
    count(endpoint, code);
  }

  /// A free slot, or -1 when the work was cancelled or the service is stopping first.
  int acquire(Work& w) {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      if (w.cancel->load() || stopping.load()) return -1;
      for (std::size_t k = 0; k < busy.size(); ++k) {
        if (!busy[k]) {
          busy[k] = true;
          --queued;
          ++running;
          return static_cast<int>(k);
        }
      }
      slot_freed.wait_for(lock, std::chrono::milliseconds(200));
    }
  }

  void release(int slot) {
    std::lock_guard<std::mutex> lock(mu);
    busy[slot] = false;
    --running;
    slot_freed.notify_all();
  }

  Status write_candidate(const Work& w) {
    for (const auto& [path, text] : w.request.files) {
      const fs::path file = w.dir / "candidate" / path;
      std::error_code ec;
      fs::create_directories(file.parent_path(), ec);
      if (Status s = write_file_atomic(file, text); !s.ok()) return s;
    }
    return Status::OK();
  }

  /// The answer to the work, from its process's output.
  json answer(const Work& w, const bench::JobOutput& out, double seconds) {
    const std::string id = "w" + std::to_string(w.id);
    json body = {{"id", id}, {"task", w.request.task}, {"seconds", seconds}};
    const json record = json::parse(out.out, nullptr, false);
    if (out.timed_out) {
      body["ok"] = false;
      body["error"] = "the work ran past its limit of " +
                      seconds_text(w.request.kind == "evaluate" ? options.evaluate_timeout_s
                                                                : options.rollout_timeout_s) +
                      " s";
      return body;
    }
    if (!out.started || (out.exit_code != 0 && out.exit_code != 1) || !record.is_object() ||
        !record.contains("outcome")) {
      body["ok"] = false;
      body["error"] = out.error.empty() ? "the work printed no result" : out.error;
      return body;
    }
    const EvalResult result = EvalResult::from_json(record);
    double value = 0;
    (void)recipe_value(w.request.recipe, result, &value);  // checked with the request
    body["ok"] = true;
    body["recipe"] = w.request.recipe;
    body["reward"] = value;
    body["discrete_reward"] = discrete_reward(result);
    body["outcome"] = outcome_name(result.outcome);
    body["result"] = record;
    if (w.request.kind == "rollout") {
      body["run"] = record.value("run", "");
      json trajectory = nullptr;
      if (auto run = agent::parse_run_name(record.value("run", ""))) {
        if (!store->get_trajectory(*run, &trajectory).ok()) trajectory = nullptr;
      }
      body["trajectory"] = trajectory;
    }
    return body;
  }

  void finish(Work& w, json body) {
    std::lock_guard<std::mutex> lock(w.mu);
    w.body = body.dump() + "\n";
    w.done = true;
    w.answered.notify_all();
  }

  void run_work(const std::shared_ptr<Work>& w) {
    const std::string& kind = w->request.kind;
    const auto started = Clock::now();
    const int slot = acquire(*w);
    if (slot < 0) {
      std::lock_guard<std::mutex> lock(mu);
      --queued;
      ++cancelled[kind];
      log("w" + std::to_string(w->id) + " " + kind + " " + w->request.task +
          ": cancelled while queued");
      finish(*w, {{"ok", false}, {"error", "cancelled"}});
      return;
    }
    log("w" + std::to_string(w->id) + " " + kind + " " + w->request.task + ": started on slot " +
        std::to_string(slot));
    bench::JobOutput out;
    Status written = kind == "evaluate" ? write_candidate(*w) : Status::OK();
    if (written.ok()) {
      bench::Job job;
      job.task = w->request.task;
      job.argv = work_argv(w->request, options, w->dir);
      job.timeout_s = kind == "evaluate" ? options.evaluate_timeout_s : options.rollout_timeout_s;
      job.log = w->dir / "work.log";
      job.cancel = w->cancel;
      out = executor->run(slot, job);
    } else {
      out.error = written.message();
    }
    release(slot);
    const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
    json body = answer(*w, out, seconds);
    {
      std::lock_guard<std::mutex> lock(mu);
      work_seconds[kind] += seconds;
      if (out.cancelled || w->cancel->load()) {
        ++cancelled[kind];
      } else if (body.value("ok", false)) {
        ++finished[kind];
      } else {
        ++no_verdict[kind];
      }
    }
    log("w" + std::to_string(w->id) + " " + kind + " " + w->request.task + ": " +
        (out.cancelled ? std::string("cancelled (the client went away)")
         : body.value("ok", false)
             ? body.value("outcome", "") + ", reward " + json(body["reward"]).dump()
             : "no verdict: " + body.value("error", "")) +
        " (" + seconds_text(seconds) + " s)");
    if (!options.keep_work) {
      std::error_code ec;
      fs::remove_all(w->dir, ec);
    }
    finish(*w, std::move(body));
  }

  void handle_work(const std::string& kind, const httplib::Request& req, httplib::Response& res) {
    const std::string endpoint = "/v1/" + kind;
    WorkRequest request;
    if (Status s = parse_work_request(kind, req.body, tasks, options, &request); !s.ok()) {
      return reply(res, endpoint, 400, {{"error", s.message()}});
    }
    auto w = std::make_shared<Work>();
    w->request = std::move(request);
    {
      std::lock_guard<std::mutex> lock(mu);
      if (stopping.load()) {
        res.set_header("Retry-After", "5");
        ++requests[{endpoint, 503}];
        res.status = 503;
        res.set_content(json({{"error", "the service is stopping"}}).dump() + "\n",
                        "application/json");
        return;
      }
      if (queued >= options.max_queue) {
        res.set_header("Retry-After", "5");
        ++requests[{endpoint, 503}];
        res.status = 503;
        res.set_content(json({{"error", "the queue is full (" + std::to_string(options.max_queue) +
                                            " waiting); try again later"}})
                                .dump() +
                            "\n",
                        "application/json");
        return;
      }
      w->id = next_id++;
      ++queued;
      ++live;
      active.insert(w);
      ++requests[{endpoint, 200}];
    }
    w->dir = work_dir / ("w" + std::to_string(w->id));
    std::error_code ec;
    fs::remove_all(w->dir, ec);
    fs::create_directories(w->dir, ec);
    std::thread([this, w] {
      run_work(w);
      std::lock_guard<std::mutex> lock(mu);
      active.erase(w);
      --live;
      work_ended.notify_all();
    }).detach();
    res.status = 200;
    res.set_header("X-Work-Id", "w" + std::to_string(w->id));
    const double heartbeat = options.heartbeat_s;
    res.set_chunked_content_provider(
        "application/json",
        [w, heartbeat](std::size_t, httplib::DataSink& sink) {
          std::unique_lock<std::mutex> lock(w->mu);
          if (!w->done) {
            w->answered.wait_for(lock, std::chrono::duration<double>(heartbeat));
          }
          if (w->done) {
            const std::string body = w->body;
            lock.unlock();
            if (!sink.write(body.data(), body.size())) return false;
            sink.done();
            return true;
          }
          lock.unlock();
          // The client's connection is tested by writing to it: a space is whitespace to JSON.
          if (!sink.write(" ", 1)) {
            w->cancel->store(true);
            return false;
          }
          return true;
        },
        [w](bool success) {
          if (!success) w->cancel->store(true);  // the client went away before its answer
        });
  }

  std::string metrics() {
    std::lock_guard<std::mutex> lock(mu);
    std::string m;
    m += "# HELP cuda_agent_requests_total HTTP requests answered, by endpoint and status code.\n"
         "# TYPE cuda_agent_requests_total counter\n";
    for (const auto& [key, n] : requests) {
      m += "cuda_agent_requests_total{endpoint=\"" + key.first + "\",code=\"" +
           std::to_string(key.second) + "\"} " + std::to_string(n) + "\n";
    }
    m += "# HELP cuda_agent_slots Pieces of work that can run at once.\n"
         "# TYPE cuda_agent_slots gauge\ncuda_agent_slots " +
         std::to_string(busy.size()) + "\n";
    m += "# HELP cuda_agent_work_queued Work waiting for a slot.\n"
         "# TYPE cuda_agent_work_queued gauge\ncuda_agent_work_queued " +
         std::to_string(queued) + "\n";
    m += "# HELP cuda_agent_work_running Work running.\n"
         "# TYPE cuda_agent_work_running gauge\ncuda_agent_work_running " +
         std::to_string(running) + "\n";
    auto counter = [&m](const char* name, const char* help,
                        const std::map<std::string, long long>& values) {
      m += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n";
      for (const char* kind : {"evaluate", "rollout"}) {
        const auto v = values.find(kind);
        m += std::string(name) + "{kind=\"" + kind + "\"} " +
             std::to_string(v == values.end() ? 0 : v->second) + "\n";
      }
    };
    counter("cuda_agent_work_done_total", "Work that ended with a verdict.", finished);
    counter("cuda_agent_work_no_verdict_total", "Work that ended without a verdict.", no_verdict);
    counter("cuda_agent_work_cancelled_total", "Work stopped because its client went away.",
            cancelled);
    m += "# HELP cuda_agent_work_seconds_total Seconds from acceptance to answer.\n"
         "# TYPE cuda_agent_work_seconds_total counter\n";
    for (const char* kind : {"evaluate", "rollout"}) {
      char line[128];
      const auto v = work_seconds.find(kind);
      std::snprintf(line, sizeof line, "cuda_agent_work_seconds_total{kind=\"%s\"} %.3f\n", kind,
                    v == work_seconds.end() ? 0.0 : v->second);
      m += line;
    }
    return m;
  }

  void routes() {
    server.Get("/v1/health", [this](const httplib::Request&, httplib::Response& res) {
      json body;
      {
        std::lock_guard<std::mutex> lock(mu);
        body = {{"status", stopping.load() ? "stopping" : "ok"},
                {"device", options.device},
                {"slots", busy.size()},
                {"running", running},
                {"queued", queued},
                {"tasks", tasks.size()}};
      }
      reply(res, "/v1/health", 200, body);
    });
    server.Get("/v1/tasks", [this](const httplib::Request&, httplib::Response& res) {
      json ids = json::array();
      for (const auto& [id, path] : tasks) ids.push_back(id);
      reply(res, "/v1/tasks", 200, {{"suite", suite_name}, {"tasks", ids}});
    });
    server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      count("/metrics", 200);
      res.set_content(metrics(), "text/plain; version=0.0.4");
    });
    server.Post("/v1/evaluate", [this](const httplib::Request& req, httplib::Response& res) {
      handle_work("evaluate", req, res);
    });
    server.Post("/v1/rollout", [this](const httplib::Request& req, httplib::Response& res) {
      handle_work("rollout", req, res);
    });
    // A defect in a handler is a 500 that says so, not a dropped connection.
    server.set_exception_handler(
        [this](const httplib::Request& req, httplib::Response& res, std::exception_ptr e) {
          std::string what = "unknown error";
          try {
            std::rethrow_exception(e);
          } catch (const std::exception& x) {
            what = x.what();
          } catch (...) {
          }
          log("internal error on " + req.method + " " + req.path + ": " + what);
          res.status = 500;
          res.set_content(json({{"error", "internal error: " + what}}).dump() + "\n",
                          "application/json");
        });
    // Errors httplib raises itself (413, 404) get a JSON body that says why.
    server.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;  // a handler's own refusal, already said and counted
      std::string why =
          res.status == 413
              ? "the body is over the limit of " + std::to_string(options.max_body_bytes) + " bytes"
          : res.status == 404 ? "no such endpoint: " + req.method + " " + req.path
                              : "request refused (" + std::to_string(res.status) + ")";
      const bool known = req.path == "/v1/evaluate" || req.path == "/v1/rollout" ||
                         req.path == "/v1/health" || req.path == "/v1/tasks" ||
                         req.path == "/metrics";
      count(known ? req.path : "other", res.status);
      res.set_content(json({{"error", why}}).dump() + "\n", "application/json");
    });
  }
};

Service::Service(ServiceOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

Service::~Service() { stop(); }

Status Service::start() {
  Impl& p = *impl_;
  ServiceOptions& o = p.options;
  Suite suite;
  if (Status s = load_suite(o.suite, &suite); !s.ok()) return s;
  p.suite_name = suite.name;
  for (const SuiteTask& t : suite.tasks) p.tasks[t.id] = t.path;
  if (Status s = Store::Open(o.store, &p.store); !s.ok()) return s;
  const int devices = o.device == "cuda" ? static_cast<int>(o.gpus.size()) : 1;
  const int slots = std::max(1, devices * std::max(1, o.jobs_per_device));
  p.busy.assign(slots, false);
  p.executor = std::make_unique<bench::LocalExecutor>(o.device, o.gpus, slots, o.lock_dir);
  std::error_code ec;
  fs::create_directories(o.lock_dir, ec);
  // A client gone before its answer is written must not end the service with SIGPIPE.
  ::signal(SIGPIPE, SIG_IGN);
  p.server.set_payload_max_length(o.max_body_bytes);
  const std::size_t threads = static_cast<std::size_t>(slots + o.max_queue + 8);
  p.server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  p.routes();
  if (o.port == 0) {
    p.bound_port = p.server.bind_to_any_port(o.host);
    if (p.bound_port <= 0) return Status::IoError("cannot listen on " + o.host + " (any port)");
  } else {
    if (!p.server.bind_to_port(o.host, o.port)) {
      return Status::IoError("cannot listen on " + o.host + ":" + std::to_string(o.port) +
                             " (in use, or not an address of this machine)");
    }
    p.bound_port = o.port;
  }
  p.work_dir = o.work_root / std::to_string(p.bound_port);
  std::error_code ignored;
  fs::remove_all(p.work_dir, ignored);  // a service that stopped before on this port left it
  fs::create_directories(p.work_dir, ec);
  if (ec) return Status::IoError("cannot make " + p.work_dir.string() + ": " + ec.message());
  return Status::OK();
}

int Service::port() const { return impl_->bound_port; }

void Service::wait() {
  Impl& p = *impl_;
  std::thread watcher([&p] {
    while (!p.stopping.load() && !interrupt_requested()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    p.stopping.store(true);
    p.server.stop();
  });
  p.server.listen_after_bind();
  p.stopping.store(true);
  watcher.join();
  stop();
}

void Service::stop() {
  Impl& p = *impl_;
  p.stopping.store(true);
  p.server.stop();
  std::unique_lock<std::mutex> lock(p.mu);
  for (const auto& w : p.active) w->cancel->store(true);
  p.slot_freed.notify_all();
  p.work_ended.wait(lock, [&p] { return p.live == 0; });
}

}  // namespace cuda_agent::rl
