/// The evaluation service an RL trainer calls (`cuda-agent serve`): HTTP on loopback by default.
///
///   GET  /v1/health    {"status": "ok", "device", "slots", "running", "queued", "tasks"}
///   GET  /v1/tasks     {"suite", "tasks": [ids]}
///   GET  /metrics      Prometheus text: requests by endpoint and code, work queued, running,
///                      done, cancelled and without verdict, seconds of work
///   POST /v1/evaluate  {"task": id, "files": {"model_new.py": text, "kernels/k.cu": text, ...},
///                       "recipe"?: name, "shrink"?: n}
///                      -> {"ok": true, "id", "task", "recipe", "reward", "discrete_reward",
///                          "outcome", "result": the evaluation record}
///   POST /v1/rollout   {"task": id, "endpoint": URL, "model": name, "max_turns"?: n,
///                       "temperature"?: t, "api_key_env"?: NAME, "recipe"?: name, "shrink"?: n}
///                      -> the same, with "run" and "trajectory" (the episode's record)
///
/// A request that cannot be taken is answered at once: 400 with {"error"} saying what is wrong
/// with the body, 404 for an unknown path, 413 for a body over the limit, 503 (Retry-After) when
/// the queue is full. A request taken is answered 200 at once and its body follows when the work
/// is done: until then a space is sent every second (JSON allows leading whitespace), so that a
/// client that goes away is noticed and its work stopped, queued or running. Work that reached no
/// verdict (the task itself fails, the model server is unreachable) ends {"ok": false, "error"}.
///
/// Each piece of work is one cuda-agent process (`eval` or `optimize --policy llm`) in a folder
/// of its own, on one of the service's slots: slots per GPU, each GPU's evaluations taking turns
/// through the same lock files a bench uses, so a bench and a service on one machine share it.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "util/status.h"

namespace cuda_agent::rl {

struct ServiceOptions {
  std::string host = "127.0.0.1";
  int port = 8321;              // 0: any free port (Service::port says which)
  std::filesystem::path suite;  // the tasks a request names, by id
  std::string device = "cpu";
  std::vector<std::string> gpus = {"0"};  // cuda
  int jobs_per_device = 1;                // pieces of work at once per GPU (cpu: in all)
  int max_queue = 64;                     // work waiting for a slot beyond this is refused (503)
  std::size_t max_body_bytes = 16u << 20;
  int shrink = 1;                    // unless a request says otherwise
  std::string precision = "fp32";    // unless a request says otherwise: fp32 or tf32 (--tf32)
  std::string recipe = "discrete";   // unless a request says otherwise
  double evaluate_timeout_s = 3600;  // one evaluation, compile to reward
  double rollout_timeout_s = 7200;   // one episode, all its turns and evaluations
  double heartbeat_s = 1;
  bool keep_work = false;                       // keep each request's folder (its files and logs)
  std::filesystem::path binary;                 // this cuda-agent
  std::filesystem::path store;                  // the run store the work writes to
  std::filesystem::path work_root;              // a folder per request
  std::filesystem::path lock_dir;               // the device locks (shared with bench)
  std::function<void(const std::string&)> log;  // a line per request and per piece of work
};

/// A piece of work a request asked for, checked.
struct WorkRequest {
  std::string kind;  // "evaluate" or "rollout"
  std::string task;  // the suite's id
  std::filesystem::path task_path;
  std::map<std::string, std::string> files;  // evaluate: path in the workspace -> text
  std::string recipe;
  int shrink = 1;
  std::string precision = "fp32";  // the candidate's: fp32, or tf32 (EvalOptions::precision)
  // rollout
  std::string endpoint, model, api_key_env;
  int max_turns = 0;  // 0: optimize's default
  std::optional<double> temperature;
};

/// Checks a request body against the suite's tasks (id -> file): InvalidArgument saying what is
/// wrong (not a JSON object, an unknown task or recipe, a file outside model_new.py and kernels/,
/// more than 256 files, a missing endpoint, ...).
Status parse_work_request(const std::string& kind, const std::string& body,
                          const std::map<std::string, std::filesystem::path>& tasks,
                          const ServiceOptions& options, WorkRequest* request);

/// The command line that does the work in folder dir, without the device lock (the slot's).
std::vector<std::string> work_argv(const WorkRequest& request, const ServiceOptions& options,
                                   const std::filesystem::path& dir);

class Service {
 public:
  explicit Service(ServiceOptions options);
  ~Service();
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  /// Loads the suite and binds the port; an error says which failed.
  Status start();
  int port() const;
  /// Serves until stop() or an interrupt (SIGINT, SIGTERM); running work is stopped on the way.
  void wait();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cuda_agent::rl
