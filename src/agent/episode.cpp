#include "agent/episode.h"

#include "agent/shell_tools.h"
#include "agent/skill.h"
#include "agent/trajectory.h"
#include "util/files.h"
#include "workspace/workspace.h"

namespace cuda_agent::agent {

namespace fs = std::filesystem;

std::string task_message(const Task& task, const std::string& device, int shrink,
                         const std::string& precision) {
  std::string text = "Task " + task.id + ", on the " + device +
                     " device. Make model_new.py compute what model.py computes, over kernels "
                     "you write in kernels/, correct and faster than torch.compile.";
  if (shrink > 1) {
    text += " The task's SCALABLE_SIZES are divided by " + std::to_string(shrink) +
            " for every evaluation.";
  }
  if (precision == "tf32") {
    text +=
        " Every evaluation lets cuBLAS and cuDNN take model_new.py's fp32 GEMMs and "
        "convolutions in TF32 (it sets that itself; model_new.py may not); eager and "
        "torch.compile are timed in full fp32.";
  }
  return text + "\n\nmodel.py:\n```python\n" + task.source + "\n```\n";
}

Status run_llm_episode(const Task& task, const EpisodeOptions& options, llm::LlmClient* client,
                       Store* store, ProcessRunner* runner,
                       std::function<void(const std::string&)> progress, EpisodeOutcome* outcome) {
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  const std::string started_at = utc_now();
  std::error_code ec;
  if (fs::exists(options.private_dir, ec) && !fs::is_empty(options.private_dir, ec)) {
    return Status::InvalidArgument("the episode's private folder " + options.private_dir.string() +
                                   " is not empty");
  }
  for (const char* sub : {"logs", "cache"}) fs::create_directories(options.private_dir / sub, ec);
  if (ec)
    return Status::IoError("cannot create " + options.private_dir.string() + ": " + ec.message());

  // The episode store: the workspace's record and the cached baselines, nothing else.
  std::unique_ptr<Store> episode_store;
  if (Status s = Store::Open(options.private_dir / "store.sqlite", &episode_store); !s.ok()) {
    return s;
  }
  InitOptions init{options.eval.device,   options.template_dir, options.binary,
                   episode_store->path(), options.eval.shrink,  options.eval.precision};
  WorkspaceRecord laid_out;
  if (Status s = init_workspace(task, options.workspace, init, store, &laid_out); !s.ok()) {
    return s;
  }
  if (Status s = episode_store->put_workspace(laid_out); !s.ok()) return s;
  if (Status s = episode_store->copy_baselines_from(*store); !s.ok()) return s;
  say("workspace: " + options.workspace.string());

  Skill skill;
  if (Status s = load_skill(options.workspace / "SKILL.md", &skill); !s.ok()) return s;

  ToolContext context{WorkspacePaths(options.workspace), {}, {}, nullptr};
  // In-episode evaluations build into the episode's cache (default_cache_dir follows it).
  context.env["XDG_CACHE_HOME"] = (options.private_dir / "cache").string();
  const fs::path root = context.paths.root();
  for (const std::string& entry : read_only_entries()) {
    context.readonly_paths.push_back(root / entry);
  }
  for (const char* suffix : {"", "-wal", "-shm"}) {
    context.readonly_paths.push_back(store->path().string() + suffix);
  }
  // The run's build cache (not the whole cache folder, which may hold the workspace itself).
  context.readonly_paths.push_back(options.eval.compile.cache_dir);
  context.readonly_paths.push_back(options.eval.harness_dir);
  context.readonly_paths.push_back(options.binary);
  context.shells = std::make_shared<ShellSessions>(runner, options.private_dir / "logs");

  ToolRegistry tools = default_tools();
  AgentLoop loop(options.agent, client, &tools, &context, say);
  outcome->episode = loop.run(
      system_prompt(skill, options.eval.device),
      task_message(task, options.eval.device, options.eval.shrink, options.eval.precision));
  context.shells.reset();  // background shells end with the episode

  // The fresh evaluation, against the record as it was laid out. An interrupted episode is
  // filed without one; one that reaches no verdict is filed with the reason, then reported.
  Status evaluated = Status::OK();
  nlohmann::json final_evaluation;
  if (outcome->episode.ending == Ending::kInterrupted) {
    say("evaluate: skipped, the episode was interrupted");
  } else {
    WorkspaceRecord now;
    if (Status s = store->get_workspace(laid_out.path, &now);
        !s.ok() || now.checksums != laid_out.checksums || now.task_source != laid_out.task_source) {
      say("evaluate: the run store's record of the workspace had changed; put back as laid out");
      if (Status p = store->put_workspace(laid_out); !p.ok()) return p;
    }
    EvalOptions eval = options.eval;
    // Baselines cached in a store the model's commands could have written are not trusted.
    eval.use_baseline_cache = eval.use_baseline_cache && readonly_isolation_available();
    say("evaluate: the workspace as the episode left it");
    Evaluator evaluator(eval, runner, store, say);
    evaluated = evaluator.evaluate(options.workspace, &outcome->final);
    final_evaluation =
        evaluated.ok() ? outcome->final.to_json() : nlohmann::json{{"error", evaluated.message()}};
  }

  EpisodeInfo info;
  info.policy = options.policy;
  info.model = options.agent.model;
  info.endpoint = options.endpoint;
  info.task = {{"id", task.id}, {"path", task.path.string()}, {"sha256", task.sha256}};
  info.device = options.eval.device;
  info.workspace = root.string();
  info.started_at = started_at;
  info.tools = tools.names();
  if (Status s = episode_store->list_evaluations(0, &info.evaluations); !s.ok()) return s;
  info.final_evaluation = final_evaluation;
  outcome->record = trajectory_record(outcome->episode, info);
  if (Status s = store->add_trajectory(outcome->record, &outcome->run_id); !s.ok()) return s;
  outcome->record["id"] = outcome->run_id;
  outcome->evaluated = evaluated.ok() && outcome->episode.ending != Ending::kInterrupted;
  return evaluated;
}

}  // namespace cuda_agent::agent
