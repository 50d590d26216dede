#include "cli/optimize_command.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>

#include "agent/episode.h"
#include "agent/recorder.h"
#include "agent/skill.h"
#include "agent/trajectory.h"
#include "cli/exit_status.h"
#include "cli/precision_flag.h"
#include "eval/evaluator.h"
#include "llm/client.h"
#include "llm/replay_client.h"
#include "sandbox/process_runner.h"
#include "store/store.h"
#include "synth/capture.h"
#include "synth/elementwise.h"
#include "synth/model_source.h"
#include "synth/pipeline.h"
#include "synth/pool_plan.h"
#include "synth/rewrite.h"
#include "synth/row_plan.h"
#include "synth/scan_plan.h"
#include "task/task.h"
#include "util/files.h"
#include "util/paths.h"
#include "util/text.h"
#include "workspace/workspace.h"

namespace fs = std::filesystem;

namespace cuda_agent {
namespace {

/// A new folder for the episode: DIR/<task id>-<policy>, -<policy>-2, ... under the cache.
fs::path fresh_workspace(const std::string& task_id, const std::string& policy) {
  fs::path base = default_cache_dir() / "episodes";
  std::error_code ec;
  for (int n = 1;; ++n) {
    fs::path dir = base / (task_id + "-" + policy + (n == 1 ? "" : "-" + std::to_string(n)));
    if (!fs::exists(dir, ec) && !fs::exists(dir.string() + ".private", ec)) return dir;
  }
}

/// Whether a candidate that ended so gives way to its fallback: it did not build, computed
/// something else, raised, crashed or hung; not a broken rule or a stopped evaluation.
bool gives_way(Outcome outcome) {
  return outcome == Outcome::kCompileError || outcome == Outcome::kMismatch ||
         outcome == Outcome::kRuntimeError || outcome == Outcome::kCrash ||
         outcome == Outcome::kTimeout;
}

/// Times a passing candidate's launch configurations through the evaluator and leaves the
/// fastest in the workspace, filing it in the tuning database; or, when the database already
/// has a winner for the candidate's pattern, class of sizes and device, starts from that one.
/// Every configuration is in the one compiled library, so each try is an evaluation without a
/// compile; each is stored like any other evaluation.
struct Tuner {
  const synth::Candidate& candidate;
  fs::path dir;
  Evaluator* evaluator;
  Store* store;
  std::function<void(const std::string&)> say;

  /// *config: the tuning database's winner for the candidate on device, one of its
  /// configurations, or null.
  Status winner(const std::string& device, const synth::KernelConfig** config) const {
    *config = nullptr;
    std::optional<nlohmann::json> known;
    const TuningKey key{candidate.pattern, candidate.shape_class, device};
    if (Status s = store->get_tuning(key, &known); !s.ok()) return s;
    if (!known) return Status::OK();
    const int id = known->value("config", -1);
    for (const synth::KernelConfig& c : candidate.configs) {
      if (c.id == id) *config = &c;
    }
    return Status::OK();
  }

  /// *result: configuration `current`'s evaluation, replaced by the winner's.
  Status run(bool again, int current, EvalResult* result, nlohmann::json* report) {
    const TuningKey key{candidate.pattern, candidate.shape_class, result->device_name};
    const synth::KernelConfig* winner = nullptr;
    if (Status s = this->winner(key.device, &winner); !s.ok()) return s;
    const auto& configs = candidate.configs;
    (*report)["shape_class"] = candidate.shape_class;
    if (winner && !again) {
      say("tune: the tuning database has " + winner->label + " for " + candidate.shape_class +
          " on " + key.device);
      (*report)["from_database"] = true;
      (*report)["config"] = winner->id;
      (*report)["label"] = winner->label;
      if (winner->id == current) return Status::OK();  // evaluated already
      EvalResult tuned;
      if (Status s = evaluate(winner->id, &tuned); !s.ok()) return s;
      if (tuned.passed()) {
        *result = tuned;
        return Status::OK();
      }
      say("tune: it fails here (" + tuned.reason + "); back to the one evaluated first");
      return evaluate(current, result);
    }
    std::size_t best =
        std::find_if(configs.begin(), configs.end(),
                     [current](const synth::KernelConfig& c) { return c.id == current; }) -
        configs.begin();
    EvalResult best_result = *result;
    nlohmann::json tried = nlohmann::json::array();
    tried.push_back(attempt(configs[best], *result));
    for (std::size_t c = 0; c < configs.size(); ++c) {
      if (configs[c].id == current) continue;
      say("tune: " + std::to_string(tried.size() + 1) + "/" + std::to_string(configs.size()) +
          ": " + configs[c].label);
      EvalResult r;
      if (Status s = evaluate(configs[c].id, &r); !s.ok()) return s;
      tried.push_back(attempt(configs[c], r));
      if (r.passed() && r.candidate_us && *r.candidate_us < *best_result.candidate_us) {
        best = c;
        best_result = r;
      }
    }
    // The workspace keeps the winner; its evaluation is the one reported.
    if (Status s = write_config(configs[best].id); !s.ok()) return s;
    *result = best_result;
    say("tune: fastest " + configs[best].label + " (" + format_us(*best_result.candidate_us) +
        " us) of " + std::to_string(configs.size()));
    nlohmann::json record = nlohmann::json::object();
    record["config"] = configs[best].id;
    record["label"] = configs[best].label;
    record["candidate_us"] = *best_result.candidate_us;
    record["evaluation"] = best_result.id;
    record["tried"] = tried;
    if (Status s = store->put_tuning(key, record); !s.ok()) return s;
    (*report)["from_database"] = false;
    (*report)["config"] = configs[best].id;
    (*report)["label"] = configs[best].label;
    (*report)["tried"] = tried;
    return Status::OK();
  }

  Status write_config(int id) {
    std::string model;
    if (Status s = read_file(dir / "model_new.py", &model); !s.ok()) return s;
    return write_file_atomic(dir / "model_new.py", synth::with_config(model, id));
  }

  Status evaluate(int id, EvalResult* r) {
    if (Status s = write_config(id); !s.ok()) return s;
    return evaluator->evaluate(dir, r);
  }

  static nlohmann::json attempt(const synth::KernelConfig& config, const EvalResult& r) {
    nlohmann::json a = nlohmann::json::object();
    a["config"] = config.id;
    a["label"] = config.label;
    a["outcome"] = outcome_name(r.outcome);
    a["evaluation"] = r.id;
    if (r.candidate_us) a["candidate_us"] = *r.candidate_us;
    return a;
  }

  static std::string format_us(double us) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f", us);
    return text;
  }
};

Status append_line(const std::string& path, const std::string& line) {
  std::ofstream out(path, std::ios::app);
  out << line << "\n";
  if (!out) return Status::IoError("cannot append to " + path);
  return Status::OK();
}

/// The task and the run store (empty path: the default one) an episode needs.
Status open_run(const std::string& task_path, const std::string& store_path, Task* task,
                std::unique_ptr<Store>* store) {
  if (Status s = load_task(task_path, task); !s.ok()) return s;
  return Store::Open(store_path.empty() ? default_store_path() : fs::path(store_path), store);
}

/// The trajectory that --replay names: a run in the store ("r3"), or the last record of a JSONL
/// file of trajectories.
Status recorded_trajectory(const std::string& which, Store* store, nlohmann::json* record) {
  if (std::optional<long long> run = agent::parse_run_name(which)) {
    return store->get_trajectory(*run, record);
  }
  std::string text;
  if (Status s = read_file(which, &text); !s.ok()) return s;
  std::size_t end = text.find_last_not_of(" \t\r\n");
  if (end == std::string::npos) return Status::InvalidArgument(which + " is empty");
  std::size_t begin = text.rfind('\n', end);
  begin = begin == std::string::npos ? 0 : begin + 1;
  *record = nlohmann::json::parse(text.substr(begin, end - begin + 1), nullptr, false);
  if (record->is_discarded()) {
    return Status::InvalidArgument(which + ": its last line is not a JSON trajectory");
  }
  return Status::OK();
}

}  // namespace

struct OptimizeCommand::Args {
  CLI::App* command = nullptr;
  std::string task;
  std::string workspace;
  std::string policy = "synth";
  bool as_json = false;
  std::string tune = "auto";
  EvalOptions eval;
  // --policy llm
  std::string endpoint, model, api_key_env, trajectory;
  std::string replay;  // --policy replay
  agent::AgentOptions agent;
  double temperature = -1;
  double request_timeout_s = 600;
};

OptimizeCommand::OptimizeCommand(CLI::App* app, const std::string& default_device)
    : args_(std::make_unique<Args>()) {
  Args& a = *args_;
  a.eval.device = default_device;
  a.command = app->add_subcommand("optimize",
                                  "write fused kernels for a task with a policy and evaluate them");
  a.command->add_option("task", a.task, "KernelBench-format task file")->required();
  a.command
      ->add_option("--policy", a.policy,
                   "synth: the built-in synthesizer; llm: a model through the agent's tools; "
                   "replay: a recorded episode's calls again, through the same tools")
      ->check(CLI::IsMember({"synth", "llm", "replay"}))
      ->capture_default_str();
  a.command->add_option("--endpoint", a.endpoint,
                        "llm: the OpenAI-compatible server's base URL, e.g. "
                        "http://127.0.0.1:8000/v1 (vLLM, SGLang, Ollama, llama.cpp)");
  a.command->add_option("--model", a.model, "llm: the model name the server serves");
  a.command->add_option("--replay", a.replay,
                        "replay: the episode to replay, a run in the store (r3) or a JSONL file of "
                        "trajectories (its last record)");
  a.command->add_option("--api-key-env", a.api_key_env,
                        "llm: the environment variable holding the API key (none by default)");
  a.command->add_option("--max-turns", a.agent.max_turns, "llm: turns before the episode ends")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  a.command
      ->add_option("--max-context", a.agent.max_context_tokens,
                   "llm: the model's context in tokens; older tool output is cut to fit")
      ->check(CLI::Range(1024LL, 10000000LL))
      ->capture_default_str();
  a.command->add_option("--max-reply-tokens", a.agent.max_reply_tokens, "llm: max_tokens per reply")
      ->check(CLI::Range(16, 1000000))
      ->capture_default_str();
  a.command->add_option("--temperature", a.temperature,
                        "llm: sampling temperature (default: the server's)");
  a.command
      ->add_option("--request-timeout", a.request_timeout_s, "llm: seconds one request may take")
      ->capture_default_str();
  a.command->add_option("--trajectory", a.trajectory,
                        "also append the episode's trajectory to this JSONL file");
  a.command->add_option("--device", a.eval.device, "cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  a.command
      ->add_option("--shrink", a.eval.shrink, "divide the task's SCALABLE_SIZES constants by this")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  add_tf32_flag(a.command, &a.eval.precision, "in every evaluation", "the results record it");
  a.command->add_option("--workspace", a.workspace,
                        "the episode's folder (default ~/.cache/cuda-agent/episodes/TASK-POLICY)");
  a.command
      ->add_option("--stage", a.eval.stage, "stop after: compile, verify, or run all (profile)")
      ->check(CLI::IsMember({"compile", "verify", "profile", "all"}))
      ->capture_default_str();
  a.command
      ->add_option("--tune", a.tune,
                   "auto: the tuning database's launch configuration, else time each and keep "
                   "the fastest; always: time each again; off: the default")
      ->check(CLI::IsMember({"auto", "always", "off"}))
      ->capture_default_str();
  a.command->add_option("--device-lock", a.eval.device_lock,
                        "hold this lock file while verifying and timing on the device, so that "
                        "processes sharing a GPU take turns (bench sets one per GPU)");
  a.command->add_option("--baseline-scope", a.eval.baseline_scope,
                        "time eager and torch.compile for this scope alone, once, rather than "
                        "take the store's (bench --fresh-baselines gives its run's name)");
  a.command->add_flag("--json", a.as_json, "print the evaluation record as JSON");
}

OptimizeCommand::~OptimizeCommand() = default;

bool OptimizeCommand::chosen() const { return args_->command->parsed(); }

int OptimizeCommand::run(const std::string& store_path) {
  Args& a = *args_;
  if (a.policy != "synth") return run_agent(store_path);
  Task task;
  std::unique_ptr<Store> store;
  if (Status s = open_run(a.task, store_path, &task, &store); !s.ok()) return fail(s);
  PosixProcessRunner runner;
  // Progress goes to stderr also with --json, whose record alone is on stdout.
  auto say = [](const std::string& line) { std::cerr << "  " << line << "\n"; };

  // What the synthesizer did, in its words: the first turn of its trajectory.
  std::vector<std::string> plan;
  auto note = [&](const std::string& line) {
    say(line);
    plan.push_back(line);
  };
  note("capture: tracing " + task.id + " with torch.export");
  EvalOptions& o = a.eval;
  use_run_folders(&o, default_cache_dir() / "build", store->path());
  synth::CaptureOptions capture;
  capture.harness_dir = harness_dir();
  capture.shrink = a.eval.shrink;
  capture.bytecode_dir = o.bytecode_dir;
  synth::Graph graph;
  if (Status s = synth::capture_graph(task.path, capture, &runner, &graph); !s.ok()) {
    return fail(s);
  }
  for (const auto& rewrite : synth::rewrite_graph(&graph)) {
    note("rewrite: " + rewrite.name + ": " + rewrite.detail);
  }
  // The plans in order, the first that takes the whole graph writes the candidate: one fused
  // kernel (elementwise, rows, pooling, scan), else a pipeline of library GEMMs and convolutions
  // with fused kernels between them.
  using Synthesize = Status (*)(const synth::Graph&, const std::string&, synth::Candidate*);
  static const std::pair<const char*, Synthesize> kPlans[] = {
      {"one fused elementwise kernel", synth::synthesize_elementwise},
      {"one fused row kernel", synth::synthesize_rows},
      {"one fused window kernel (pooling, depthwise convolution)", synth::synthesize_pool},
      {"one fused scan kernel", synth::synthesize_scan},
      {"a pipeline", synth::synthesize_pipeline}};
  synth::Candidate candidate;
  std::string made;
  std::vector<std::string> refusals;
  for (const auto& [what, synthesize] : kPlans) {
    candidate = {};
    Status s = synthesize(graph, a.eval.device, &candidate);
    if (!s.ok()) {
      refusals.push_back(s.message());
      continue;
    }
    synth::add_packed_entries(&candidate);  // one buffer a call, not a conversion an argument
    made = std::string(what) + " for " + std::to_string(graph.ops.size()) + " ops";
    if (synthesize == synth::synthesize_pipeline) {
      std::size_t sources = 0;  // the fused kernels', and the copy kernel's where it is needed
      for (const auto& file : candidate.files) sources += file.first.rfind("kernels/", 0) == 0;
      made += ": GEMMs and convolutions through the library, " + std::to_string(sources) +
              " kernel source(s) for the rest";
    }
    break;
  }
  if (made.empty()) {
    fail(Status::InvalidArgument("the synthesizer has no plan for " + task.id + ": " +
                                 join(refusals, "\n")));
    return kExitNoCandidate;
  }
  note("synthesize: " + made);

  fs::path dir = a.workspace.empty() ? fresh_workspace(task.id, "synth") : fs::path(a.workspace);
  InitOptions init{a.eval.device,     harness_dir() / "workspace",
                   self_executable(), {},
                   a.eval.shrink,     a.eval.precision};
  WorkspaceRecord record;
  if (Status s = init_workspace(task, dir, init, store.get(), &record); !s.ok()) return fail(s);
  Evaluator evaluator(o, &runner, store.get(), say);
  Tuner tuner{candidate, dir, &evaluator, store.get(), say};

  // Where the tuning database has a winner for the kind on the device this store last
  // evaluated on, the episode starts from it (the device is confirmed after the evaluation).
  int by_default = candidate.configs.at(0).id;
  int start = by_default;
  if (a.tune == "auto") {
    std::optional<std::string> last_device;
    if (Status s = store->last_device_name(a.eval.device, &last_device); !s.ok()) return fail(s);
    const synth::KernelConfig* winner = nullptr;
    if (last_device) {
      if (Status s = tuner.winner(*last_device, &winner); !s.ok()) return fail(s);
    }
    if (winner && winner->id != by_default) {
      start = winner->id;
      say("tune: starting from the tuning database's " + winner->label + " (" +
          candidate.shape_class + " on " + *last_device + ")");
    }
  }
  std::map<std::string, std::string>& files = candidate.files;
  files["model_new.py"] = synth::with_config(files["model_new.py"], start);
  // The files are written through the agent's Write tool, and the episode recorded as a
  // trajectory like a model's.
  agent::Skill skill;
  if (Status s = agent::load_skill(dir / "SKILL.md", &skill); !s.ok()) return fail(s);
  agent::ToolContext context{agent::WorkspacePaths(dir), {}, {}, nullptr};
  agent::EpisodeRecorder recorder(
      &context, agent::system_prompt(skill, a.eval.device),
      agent::task_message(task, a.eval.device, a.eval.shrink, a.eval.precision));
  const std::string started_at = agent::utc_now();
  recorder.turn(join(plan, "\n"));
  for (const auto& [path, text] : files) {
    agent::ToolOutput wrote = recorder.call("Write", {{"file_path", path}, {"content", text}});
    if (wrote.error) return fail(Status::IoError(wrote.text));
  }
  say("workspace: " + dir.string());
  long long last_before = 0;
  if (Status s = store->last_evaluation_id(&last_before); !s.ok()) return fail(s);

  EvalResult result;
  if (Status s = evaluator.evaluate(dir, &result); !s.ok()) return fail(s);
  if (start != by_default && !result.passed()) {
    say("tune: the database's configuration fails here (" + result.reason + "); the default");
    start = by_default;
    if (Status s = tuner.evaluate(start, &result); !s.ok()) return fail(s);
  }
  // A candidate that does not build, fails verification or crashes gives way to its plainer
  // fallback, as an agent would turn to one: the fallback's files written over the first's, and
  // the first's own kernels emptied (the library builds every source in kernels/).
  if (!result.passed() && gives_way(result.outcome) && !candidate.fallbacks.empty()) {
    synth::Candidate fallback = std::move(candidate.fallbacks.front());
    say("synthesize: " + std::string(outcome_name(result.outcome)) + " (" + result.reason + "); " +
        fallback.summary + " instead");
    recorder.turn("The candidate fails here: " + result.reason + ". Instead: " + fallback.summary +
                  ".");
    for (const auto& [path, text] : files) {
      if (fallback.files.count(path) || path.rfind("kernels/", 0) != 0) continue;
      agent::ToolOutput wrote = recorder.call(
          "Write", {{"file_path", path}, {"content", "// Superseded: no module calls it.\n"}});
      if (wrote.error) return fail(Status::IoError(wrote.text));
    }
    candidate = std::move(fallback);
    by_default = start = candidate.configs.at(0).id;
    files["model_new.py"] = synth::with_config(files["model_new.py"], start);
    for (const auto& [path, text] : files) {
      agent::ToolOutput wrote = recorder.call("Write", {{"file_path", path}, {"content", text}});
      if (wrote.error) return fail(Status::IoError(wrote.text));
    }
    if (Status s = evaluator.evaluate(dir, &result); !s.ok()) return fail(s);
  }
  nlohmann::json tuning;
  if (a.tune != "off" && o.stage == "all" && result.passed() && result.candidate_us &&
      candidate.configs.size() > 1) {
    if (Status s = tuner.run(a.tune == "always", start, &result, &tuning); !s.ok()) return fail(s);
  }
  // The tuner left its choice in model_new.py; the trajectory makes it an edit of the file the
  // first turn wrote.
  std::string tuned;
  if (Status s = read_file(dir / "model_new.py", &tuned); !s.ok()) return fail(s);
  if (tuned != files["model_new.py"]) {
    const std::optional<int> was = synth::config_of(files["model_new.py"]);
    const std::optional<int> now = synth::config_of(tuned);
    if (Status s = write_file_atomic(dir / "model_new.py", files["model_new.py"]); !s.ok()) {
      return fail(s);
    }
    // Without a tuner's record, the change was the default's, where the database's failed.
    recorder.turn(tuning.is_object()
                      ? "tune: " + tuning.value("label", std::string("another configuration")) +
                            " is the fastest"
                      : "tune: the default configuration, the tuning database's failing here");
    agent::ToolOutput edited =
        was && now ? recorder.call("Edit", {{"file_path", "model_new.py"},
                                            {"old_string", synth::config_text(*was)},
                                            {"new_string", synth::config_text(*now)}})
                   : agent::ToolOutput::fail("no CONFIG line");
    if (edited.error) {
      agent::ToolOutput wrote =
          recorder.call("Write", {{"file_path", "model_new.py"}, {"content", tuned}});
      if (wrote.error) return fail(Status::IoError(wrote.text));
    }
  }
  agent::Episode episode = recorder.finish(
      std::string(result.passed() ? "done: " : "failed: ") + outcome_name(result.outcome) +
      (result.reward ? ", reward " + std::to_string(*result.reward) : "") + "; " + result.reason);
  agent::EpisodeInfo info;
  info.policy = "synth";
  info.task = {{"id", task.id}, {"path", task.path.string()}, {"sha256", task.sha256}};
  info.device = a.eval.device;
  info.workspace = context.paths.root().string();
  info.started_at = started_at;
  info.tools = {"Write", "Edit"};
  std::vector<nlohmann::json> evaluations;
  if (Status s = store->list_evaluations(last_before, &evaluations); !s.ok()) return fail(s);
  for (nlohmann::json& e : evaluations) {
    // Other processes may share the store: only this workspace's.
    if (e.value("workspace", "") == record.path) info.evaluations.push_back(std::move(e));
  }
  info.final_evaluation = result.to_json();
  long long run_id = 0;
  nlohmann::json trajectory = agent::trajectory_record(episode, info);
  if (Status s = store->add_trajectory(trajectory, &run_id); !s.ok()) return fail(s);
  if (!a.trajectory.empty()) {
    trajectory["id"] = run_id;
    if (Status s = append_line(a.trajectory, trajectory.dump()); !s.ok()) return fail(s);
  }
  const std::string run = agent::run_name(run_id);
  if (a.as_json) {
    nlohmann::json record = result.to_json();
    record["run"] = run;
    record["evaluation_count"] = info.evaluations.size();
    if (!tuning.is_null()) record["tuning"] = tuning;
    // The launch configurations the kernels take (model_new.py's CONFIG), the first the default.
    record["configs"] = nlohmann::json::array();
    for (const synth::KernelConfig& c : candidate.configs)
      record["configs"].push_back({{"id", c.id}, {"label", c.label}});
    std::cout << record.dump(2) << "\n";
  } else {
    std::cout << format_summary(result) << "  workspace " << dir.string()
              << "\n  stored as evaluation " << result.id << " in " << store->path().string()
              << "\n  trajectory " << run << " (cuda-agent show " << run << ")\n";
  }
  return result.passed() ? kExitPass : kExitFail;
}

int OptimizeCommand::run_agent(const std::string& store_path) {
  Args& a = *args_;
  const bool replay = a.policy == "replay";
  if (replay && a.replay.empty()) {
    return fail(
        Status::InvalidArgument("--policy replay needs --replay RUN (r3, or a JSONL file)"));
  }
  if (!replay && (a.endpoint.empty() || a.model.empty())) {
    return fail(Status::InvalidArgument("--policy llm needs --endpoint URL and --model NAME"));
  }
  llm::HttpClientOptions client_options;
  client_options.endpoint = a.endpoint;
  client_options.timeout_s = a.request_timeout_s;
  if (!a.api_key_env.empty()) {
    const char* key = std::getenv(a.api_key_env.c_str());
    if (!key || !*key) {
      return fail(Status::InvalidArgument("--api-key-env " + a.api_key_env +
                                          ": that environment variable is not set"));
    }
    client_options.api_key = key;
    // The model's commands inherit this process's environment: the key is not theirs to read.
    unsetenv(a.api_key_env.c_str());
  }
  if (a.agent.max_reply_tokens >= a.agent.max_context_tokens) {
    return fail(Status::InvalidArgument("--max-reply-tokens must be less than --max-context"));
  }
  Task task;
  std::unique_ptr<Store> store;
  if (Status s = open_run(a.task, store_path, &task, &store); !s.ok()) return fail(s);
  PosixProcessRunner runner;
  // Progress goes to stderr also with --json, whose record alone is on stdout.
  auto say = [](const std::string& line) { std::cerr << "  " << line << "\n"; };
  agent::EpisodeOptions o;
  o.agent = a.agent;
  o.agent.model = a.model;
  if (a.temperature >= 0) o.agent.temperature = a.temperature;
  o.endpoint = a.endpoint;
  o.workspace = a.workspace.empty() ? fresh_workspace(task.id, a.policy) : fs::path(a.workspace);
  o.private_dir = o.workspace.string() + ".private";
  o.template_dir = harness_dir() / "workspace";
  o.binary = self_executable();
  o.eval = a.eval;
  use_run_folders(&o.eval, default_cache_dir() / "build", store->path());
  std::unique_ptr<llm::LlmClient> client;
  if (replay) {
    nlohmann::json recorded;
    if (Status s = recorded_trajectory(a.replay, store.get(), &recorded); !s.ok()) return fail(s);
    std::vector<llm::Message> replies;
    if (Status s = llm::ReplayClient::from_trajectory(recorded, &replies); !s.ok()) {
      return fail(s);
    }
    say("agent: replaying " + std::to_string(replies.size()) + " replies of " + a.replay);
    o.agent.model = "replay of " + a.replay;
    o.policy = "replay";
    client = std::make_unique<llm::ReplayClient>(std::move(replies));
  } else {
    auto http = std::make_unique<llm::HttpLlmClient>(client_options);
    say("agent: " + a.model + " at " + http->url());
    client = std::move(http);
  }
  agent::EpisodeOutcome outcome;
  Status ran = agent::run_llm_episode(task, o, client.get(), store.get(), &runner, say, &outcome);
  const std::string run = agent::run_name(outcome.run_id);
  if (outcome.run_id > 0 && !a.trajectory.empty()) {
    if (Status s = append_line(a.trajectory, outcome.record.dump()); !s.ok()) return fail(s);
  }
  if (outcome.run_id > 0 && !outcome.evaluated) {
    std::cerr << "  trajectory " << run << " filed (cuda-agent show " << run << ")\n";
  }
  if (!ran.ok()) return fail(ran);
  if (!outcome.evaluated) return kExitError;  // interrupted: no verdict
  if (a.as_json) {
    nlohmann::json record = outcome.final.to_json();
    record["run"] = run;
    record["ending"] = outcome.record["ending"];
    record["turns"] = outcome.episode.turns.size();
    // The model's own evaluations in the episode, and the final one.
    record["evaluation_count"] =
        outcome.record.value("evaluations", nlohmann::json::array()).size() + 1;
    std::cout << record.dump(2) << "\n";
  } else {
    std::cout << format_summary(outcome.final) << "  workspace " << o.workspace.string()
              << "\n  episode: " << agent::ending_name(outcome.episode.ending) << " after "
              << outcome.episode.turns.size() << " turns; trajectory " << run
              << " (cuda-agent show " << run << ")\n";
  }
  return outcome.final.passed() ? kExitPass : kExitFail;
}

}  // namespace cuda_agent
