/// Harness scripts started by forking a Python that has already imported torch
/// (harness/fork_server.py) instead of by fork and exec: the import is seconds of CPU, and an
/// evaluation runs several harness processes (prepare, the candidate, the checks, the timings).
/// One server per command line (the interpreter, its flags, the server's own: the trusted
/// scripts' server and the candidates', --candidates, are never one) and environment less
/// ProcessSpec::env_after_imports, started on first use and shared by every thread of this
/// process; it ends when this process does (its control socket closes).
///
/// The child gets its own process group, the parent-death signal, its read-only paths (the plan
/// made here, the mounts made by the child in namespaces of its own, readonly_mounts.h), no
/// network where asked, no core dumps, its working directory, output files and environment, as a
/// child of fork and exec does.
///
/// Internal to the sandbox; the process runner is the only user.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "sandbox/process_runner.h"
#include "sandbox/readonly_mounts.h"

namespace cuda_agent {

/// False where the environment says CUDA_AGENT_FORK_SERVER=0: every process is then forked and
/// execed (a way around the server, should a machine's Python misbehave after a fork).
bool fork_server_enabled();

/// A child the fork server started.
struct ForkedChild {
  pid_t pid = -1;
  int status_fd = -1;  // the server writes "exit S" here when the child has ended, then closes it
  std::string pending;
  bool readonly_reported = false;  // the child said how its read-only paths went: readonly
  ReadonlyReport readonly;
};

/// Asks the server for spec.fork_server to start spec's command. spec.argv and the server's argv
/// begin alike (the interpreter and its flags); the rest of spec.argv is the script and its
/// arguments. env: the child's whole environment, KEY=VALUE. readonly: the child's read-only
/// paths as planned (null or empty: none), which it must make or stop where spec says so. False,
/// with why in *error, when the server cannot be started or does not answer (a server that failed
/// once is not tried again by this process): the caller then forks and execs as usual. Nothing
/// was started then.
bool fork_from_server(const ProcessSpec& spec, const std::vector<std::string>& env,
                      bool isolate_network, const ReadonlyPlan* readonly, ForkedChild* child,
                      std::string* error);

/// Without blocking: true once the child has ended, with *status as waitpid() gives it (killed by
/// SIGKILL where the server went away first, which takes its children with it). Closes the pipe.
/// The child's report on its read-only paths, where it sent one, is in child->readonly by then.
bool forked_child_ended(ForkedChild* child, int* status);

}  // namespace cuda_agent
