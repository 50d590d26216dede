"""Starts the evaluator's trusted harness scripts by forking a Python that has imported torch
once, rather than each paying the import (seconds of CPU) in a process of its own. Trusted only:
candidate processes are never started here, and nothing of a task or a candidate ever runs in
this process, only in the children it forks, which hold what it imported and nothing else.

The evaluator (src/sandbox/fork_server.cpp) starts it with the interpreter and flags its scripts
would run under and the control socket as file descriptor 3. Each request on that socket (a
SOCK_SEQPACKET message: JSON, and one descriptor, the write end of a pipe) asks for one script:
its argv (script and arguments), environment, working directory, output files, whether to
isolate the network and the parent-death signal. The answer goes down the pipe: "pid N" once the
child is forked, "exit S" (waitpid's status) once it has ended; then the pipe is closed. The
socket's end (the evaluator gone, killed or not) ends this process and kills its children.
"""

import startup  # noqa: F401  (first: no garbage collection while modules load)

import ctypes
import gc
import json
import os
import resource
import runpy
import select
import signal
import socket
import sys
import traceback

import torch  # noqa: F401  (the import every child then has for free)

import common  # noqa: F401
import input_sets  # noqa: F401

CONTROL_FD = 3
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def run_child(request: dict, server: int) -> None:
    """In the forked child: the sandbox's steps for a trusted process (its own process group, the
    parent-death signal, no network, no core dumps, the working directory, the output files, the
    environment), then the script as __main__. Never returns."""
    code = 1
    try:
        os.setpgid(0, 0)
        if request.get("parent_death_signal"):
            _libc.prctl(PR_SET_PDEATHSIG, int(request["parent_death_signal"]), 0, 0, 0)
            if os.getppid() != server:
                os._exit(1)  # the server ended before the signal was set: so does its child
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        if request.get("isolate_network"):
            _libc.unshare(CLONE_NEWNET)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if request.get("cwd"):
            os.chdir(request["cwd"])
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for fd, path in ((1, request.get("stdout")), (2, request.get("stderr"))):
            target = os.open(path or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(target, fd)
            os.close(target)
        os.close(null)
        os.closerange(3, 65536)  # the control socket, the other children's pipes
        os.environ.clear()
        os.environ.update(request["env"])
        script = request["argv"][0]
        sys.argv = list(request["argv"])
        sys.path[0] = os.path.dirname(os.path.abspath(script))
        try:
            runpy.run_path(script, run_name="__main__")
            code = 0
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
            if done.code is not None and not isinstance(done.code, int):
                print(done.code, file=sys.stderr)
    except BaseException:  # the script's failure is its own: told on its stderr, status 1
        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def answer(fd: int, line: str) -> None:
    try:
        os.write(fd, line.encode() + b"\n")
    except OSError:
        pass  # the evaluator stopped listening for this one


def main() -> None:
    # What the imports made lives as long as every child: out of the collector's sight, which is
    # back on for the children's own work (as common.collect_garbage_again does for a script).
    gc.freeze()
    gc.enable()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal's ^C is the evaluator's to handle
    control = socket.socket(fileno=CONTROL_FD)
    children: dict[int, int] = {}  # pid -> its answer pipe
    try:
        while True:
            ready, _, _ = select.select([control], [], [], 0.01)
            while children:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                fd = children.pop(pid, None)
                if fd is not None:
                    answer(fd, f"exit {status}")
                    os.close(fd)
            if not ready:
                continue
            message, fds, _, _ = socket.recv_fds(control, 1 << 20, 1)
            if not message:
                return  # the evaluator is gone
            if not fds:
                continue
            try:
                request = json.loads(message)
            except ValueError:
                answer(fds[0], "error the request is not JSON")
                os.close(fds[0])
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            server = os.getpid()
            pid = os.fork()
            if pid == 0:
                run_child(request, server)
            try:
                os.setpgid(pid, pid)  # also here, so that the group exists before it is signalled
            except OSError:
                pass  # the child got there first, or has already ended
            children[pid] = fds[0]
            answer(fds[0], f"pid {pid}")
    finally:
        for pid in children:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass


if __name__ == "__main__":
    main()
