/// Trusted harness scripts started by forking a Python that has already imported torch
/// (harness/fork_server.py) instead of by fork and exec: the import is seconds of CPU, and an
/// evaluation runs several trusted processes (prepare, the checks, the baselines' timings). One
/// server per interpreter command line and environment, started on first use and shared by every
/// thread of this process; it ends when this process does (its control socket closes).
///
/// Only a spec without read-only paths goes there (ProcessSpec::fork_server), which is to say a
/// trusted process: the evaluator never names the server for a candidate's. The child gets its
/// own process group, the parent-death signal, no network where asked, no core dumps, its working
/// directory, output files and environment, as a child of fork and exec does.
///
/// Internal to the sandbox; the process runner is the only user.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "sandbox/process_runner.h"

namespace cuda_agent {

/// False where the environment says CUDA_AGENT_FORK_SERVER=0: every process is then forked and
/// execed (a way around the server, should a machine's Python misbehave after a fork).
bool fork_server_enabled();

/// A child the fork server started.
struct ForkedChild {
  pid_t pid = -1;
  int status_fd = -1;  // the server writes "exit S" here when the child has ended, then closes it
  std::string pending;
};

/// Asks the server for spec.fork_server to start spec's command. spec.argv must begin with the
/// server's argv less its last element (the interpreter and its flags); the rest is the script and
/// its arguments. env: the child's whole environment, KEY=VALUE. False, with why in *error, when
/// the server cannot be started or does not answer (a server that failed once is not tried again
/// by this process): the caller then forks and execs as usual. Nothing was started then.
bool fork_from_server(const ProcessSpec& spec, const std::vector<std::string>& env,
                      bool isolate_network, ForkedChild* child, std::string* error);

/// Without blocking: true once the child has ended, with *status as waitpid() gives it (killed by
/// SIGKILL where the server went away first, which takes its children with it). Closes the pipe.
bool forked_child_ended(ForkedChild* child, int* status);

}  // namespace cuda_agent
