"""Starts the evaluator's harness scripts by forking a Python that has imported torch once,
rather than each paying the import (seconds of CPU) in a process of its own. Nothing of a task or
a candidate ever runs in this process, only in the children it forks, which hold what it
imported and nothing else.

One server is for trusted scripts (prepare.py, check.py, the baselines' timing.py, ...); the
candidates' server (--candidates) is for the candidate's processes (run_candidate.py and its
timing.py) and never for a trusted one, so what a trusted request carried never lies in the
memory a candidate's child is forked from. The evaluator starts the trusted one with
--candidates-control FD, and it forks the candidates' server, with FD as its control socket,
once its imports are done and before it reads any request: one import of torch for both. A
candidate's request names its read-only paths: the child makes them read-only mounts, locked, in
namespaces of its own before the script runs, the steps src/sandbox/readonly_mounts.h describes,
and says how that went before anything else.

The evaluator (src/sandbox/fork_server.cpp) starts it with the interpreter and flags its scripts
would run under and the control socket as file descriptor 3. Each request on that socket (a
SOCK_SEQPACKET message: JSON, and one descriptor, the write end of a pipe) asks for one script:
its argv (script and arguments), environment, working directory, output files, whether to
isolate the network, the parent-death signal and its read-only paths (the plan the evaluator
made: each path, the mounts beneath it, the writable folders beneath them, the user namespace's
id maps). The answers go down the pipe, one line each: "pid N" once the child is forked;
"readonly E S P N" from the child where it had read-only paths (errno, the step that failed,
the path's index, whether the network is isolated), before or after the pid; "exit S" (waitpid's
status) once it has ended; then the pipe is closed. The socket's end (the evaluator gone, killed
or not) ends this process and kills its children.
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
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND = 0x20, 0x400, 0x800, 0x1000
MS_REC, MS_PRIVATE, MS_RELATIME = 0x4000, 0x40000, 0x200000
PR_SET_PDEATHSIG = 1
# In a child's environment: the script and arguments it was forked to run (JSON).
FORKED_SCRIPT = "CUDA_AGENT_FORKED_SCRIPT"
# The mount flags a remount repeats (statvfs's, then mount's): the kernel refuses to clear a
# locked one.
KEPT_FLAGS = ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
              (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME),
              (os.ST_RELATIME, MS_RELATIME))
# ReadonlyReport::Step in src/sandbox/readonly_mounts.h.
STEP_NAMESPACES, STEP_MOUNT, STEP_WRITABLE, STEP_LOCK = 0, 1, 2, 3
# What the child's stderr says after "could not make PATH" (readonly_failure_suffix()).
FAILURE_SUFFIX = {
    STEP_NAMESPACES: " read-only (creating a private mount namespace)",
    STEP_MOUNT: " read-only",
    STEP_WRITABLE: " writable again beneath the read-only paths",
    STEP_LOCK: " read-only for root (entering a user namespace to lock its mounts)",
}
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
                        ctypes.c_void_p)


class SandboxStepFailed(Exception):
    """A step of enter_readonly() failed: errno, the step, the index of the path."""

    def __init__(self, step: int, path: int = -1):
        super().__init__(step, path)
        self.errno = ctypes.get_errno()
        self.step = step
        self.path = path


def _call(result: int, step: int, path: int = -1) -> None:
    if result != 0:
        raise SandboxStepFailed(step, path)


def _write_proc(path: str, text: str) -> int:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    except OSError as e:
        ctypes.set_errno(e.errno or 1)
        return -1
    try:
        return 0 if os.write(fd, text.encode()) == len(text) else -1
    except OSError as e:
        ctypes.set_errno(e.errno or 1)
        return -1
    finally:
        os.close(fd)


def _map_own_ids(plan: dict, step: int) -> None:
    for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", plan["uid_map"]),
                       ("/proc/self/gid_map", plan["gid_map"])):
        _call(_write_proc(path, text), step)


def _remount(target: str, readonly: bool) -> int:
    try:
        kept = os.statvfs(target).f_flag
    except OSError as e:
        ctypes.set_errno(e.errno or 1)
        return -1
    flags = MS_BIND | MS_REMOUNT | (MS_RDONLY if readonly else 0)
    for kept_if, flag in KEPT_FLAGS:
        if kept & kept_if:
            flags |= flag
    return _libc.mount(None, target.encode(), None, flags, None)


def enter_readonly(plan: dict, isolate_network: bool) -> tuple[int, int, int, bool]:
    """In the child: src/sandbox/readonly_mounts.cpp's enter_readonly_namespace() for plan, step
    for step (a private mount namespace, each path and the mounts beneath it read-only, the
    writable folders beneath them bound writable again, then, as root, a user namespace that
    locks the mounts). Returns (errno, step, path index, network isolated); errno 0: done."""
    network = False
    try:
        flags = CLONE_NEWNS | (CLONE_NEWUSER if plan["user_namespace"] else 0)
        if isolate_network and _libc.unshare(flags | CLONE_NEWNET) == 0:
            network = True
        else:
            _call(_libc.unshare(flags), STEP_NAMESPACES)
        if plan["user_namespace"]:
            _map_own_ids(plan, STEP_NAMESPACES)
        _call(_libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), STEP_NAMESPACES)
        for i, (path, mounts) in enumerate(zip(plan["paths"], plan["mounts"])):
            _call(_libc.mount(path.encode(), path.encode(), None, MS_BIND | MS_REC, None),
                  STEP_MOUNT, i)
            for mount in mounts:
                _call(_remount(mount, True), STEP_MOUNT, i)
        for i, path in enumerate(plan["writable"]):
            _call(_libc.mount(path.encode(), path.encode(), None, MS_BIND | MS_REC, None),
                  STEP_WRITABLE, i)
            _call(_remount(path, False), STEP_WRITABLE, i)
        if plan["lock"]:
            _call(_libc.unshare(CLONE_NEWUSER), STEP_LOCK)
            _map_own_ids(plan, STEP_LOCK)
    except SandboxStepFailed as failed:
        return failed.errno or 1, failed.step, failed.path, network
    return 0, STEP_NAMESPACES, -1, network


def run_child(request: dict, server: int, answers: int) -> None:
    """In the forked child: the sandbox's steps (its own process group, the parent-death signal,
    the read-only paths, no network, no core dumps, the working directory, the output files, the
    environment), then the script as __main__. The read-only paths' outcome goes to answers, the
    request's pipe. Never returns."""
    code = 1
    try:
        os.setpgid(0, 0)
        if request.get("parent_death_signal"):
            _libc.prctl(PR_SET_PDEATHSIG, int(request["parent_death_signal"]), 0, 0, 0)
            if os.getppid() != server:
                os._exit(1)  # the server ended before the signal was set: so does its child
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        # The output files first, as fork and exec opens them before the child starts: a
        # failure to make the paths read-only is told on the child's stderr.
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        for fd, path in ((1, request.get("stdout")), (2, request.get("stderr"))):
            target = os.open(path or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(target, fd)
            os.close(target)
        isolate = bool(request.get("isolate_network"))
        plan = request.get("readonly")
        if not plan:
            if isolate:
                _libc.unshare(CLONE_NEWNET)
        else:
            error, step, path, network = enter_readonly(plan, isolate)
            if error and not network and isolate:
                network = _libc.unshare(CLONE_NEWNET) == 0
            answer(answers, f"readonly {error} {step} {path} {int(network)}")
            if error and request.get("require_readonly", True):
                named = plan["writable"] if step == STEP_WRITABLE else plan["paths"]
                os.write(2, f"cuda-agent sandbox: could not make {named[max(path, 0)]}"
                            f"{FAILURE_SUFFIX[step]}\n".encode())
                code = 127
                return
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        # After the mounts, so that a working directory under a read-only path is on the
        # read-only mount.
        if request.get("cwd"):
            os.chdir(request["cwd"])
        os.closerange(3, 65536)  # the control socket, the other children's pipes
        os.environ.clear()
        os.environ.update(request["env"])
        # A program that execs its own command line again (/proc/self/cmdline, which is still
        # this server's) runs its script again, as it would as a child of fork and exec.
        os.environ[FORKED_SCRIPT] = json.dumps(request["argv"])
        try:
            run_script(request["argv"])
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


def run_script(argv: list) -> None:
    """argv[0] as __main__, with argv as sys.argv (and after the interpreter's flags in
    sys.orig_argv), its folder first on sys.path."""
    sys.orig_argv = sys.orig_argv[:len(sys.orig_argv) - len(sys.argv)] + list(argv)
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
    runpy.run_path(argv[0], run_name="__main__")


def answer(fd: int, line: str) -> None:
    try:
        os.write(fd, line.encode() + b"\n")
    except OSError:
        pass  # the evaluator stopped listening for this one


def main() -> None:
    again = os.environ.pop(FORKED_SCRIPT, None)
    if again is not None:  # a forked child's command line, execed again: its script, once more
        run_script(json.loads(again))
        return
    # --candidates: the server for candidates' processes (the module's docstring), whose key in
    # the evaluator differs from the trusted one's by this flag. --candidates-control FD: a
    # trusted server that also starts the candidates' server, forked from it before it reads
    # any request, with FD as that one's control socket.
    args = sys.argv[1:]
    if not (args in ([], ["--candidates"]) or
            (len(args) == 2 and args[0] == "--candidates-control" and args[1].isdigit())):
        sys.exit("usage: fork_server.py [--candidates | --candidates-control FD]")
    # What the imports made lives as long as every child: out of the collector's sight, which is
    # back on for the children's own work (as common.collect_garbage_again does for a script).
    gc.freeze()
    gc.enable()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal's ^C is the evaluator's to handle
    control_fd = CONTROL_FD
    if args and args[0] == "--candidates-control":
        candidates_fd = int(args[1])
        if os.fork() == 0:  # the candidates' server: what it holds is the imports alone
            os.close(control_fd)
            control_fd = candidates_fd
            sys.orig_argv[len(sys.orig_argv) - len(args):] = ["--candidates"]
            sys.argv[1:] = ["--candidates"]
        else:
            os.close(candidates_fd)
    control = socket.socket(fileno=control_fd)
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
                run_child(request, server, fds[0])
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
