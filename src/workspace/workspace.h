/// An episode workspace: the one folder a policy works in, laid out as the CUDA-Agent release lays
/// it out.
///
///   SKILL.md        the rules and the workflow                       read-only
///   model.py        the task (the reference)                         read-only
///   model_new.py    the policy's implementation, calling kernels/    the policy writes it
///   kernels/        .cu / .cpp / .h sources                          the policy writes them
///   utils/          kernels.py (the fixed ctypes binding), compile.py, verify.py, profile.py,
///                   profile_model.py (model.py's time, op by op)
///                                                                    read-only
///   .cuda-agent/    workspace.json: how utils/ reaches the cuda-agent binary and store
///
/// Read-only files are made unwritable and their checksums recorded in the run store; every
/// evaluation first proves they are unchanged (and that nothing was added to utils/).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "store/store.h"
#include "task/task.h"
#include "util/status.h"

namespace cuda_agent {

struct InitOptions {
  std::string device = "cpu";          // "cpu" or "cuda"
  std::filesystem::path template_dir;  // harness/workspace
  std::filesystem::path binary;        // written into .cuda-agent/workspace.json
  /// The store utils/ evaluates into, written there too; empty: the store that records the
  /// workspace (an agent episode gives its own, so the model's commands never write the run's).
  std::filesystem::path store;
  /// The evaluations' --shrink, which utils/profile_model.py profiles model.py at.
  int shrink = 1;
  /// The evaluations' precision (EvalOptions::precision), which utils/ asks for too.
  std::string precision = "fp32";
};

/// The read-only infrastructure, relative to a workspace's root: files, and folders with all
/// beneath them (SKILL.md, model.py, utils, .cuda-agent). The agent's tools refuse to write
/// them, and its commands run with them mounted read-only.
const std::vector<std::string>& read_only_entries();

/// Lays out a workspace for task in dir (which must be missing or empty) and records it in store.
Status init_workspace(const Task& task, const std::filesystem::path& dir,
                      const InitOptions& options, Store* store, WorkspaceRecord* record);

/// Looks the workspace up in store and proves its read-only files are unchanged. On success
/// record holds the task text the reference must be run from. A changed, missing or added file is
/// a Corruption naming it.
Status verify_workspace(const std::filesystem::path& dir, Store* store, WorkspaceRecord* record);

/// Canonical absolute path, the key of a workspace in the store.
std::string workspace_key(const std::filesystem::path& dir);

}  // namespace cuda_agent
