"""The worker fork server: one Python process that has imported what a worker needs, and forks each
worker (and each warm spare) of a run from itself.

Why: a worker started as a fresh interpreter spends about 0.2 CPU-seconds importing confluent_kafka,
psycopg and the harness before it does anything. With 100 crashes per experiment that was most of
an experiment's CPU, and on a 2-core machine the suite's wall time is its CPU time. A fork costs a
few milliseconds.

What a crash tests does not change. Each worker is still its own process: it opens its own Kafka
and Postgres connections after the fork, and a kill point is still a SIGKILL of that process, whose
sockets the kernel closes, so the broker and Postgres see it die as before. Nothing that talks to
Kafka or Postgres exists in this process (librdkafka's threads would not survive a fork), and it
never runs a worker's loop itself.

The protocol, on a SOCK_SEQPACKET socket pair (one message per datagram):
  supervisor -> server: {"argv": [...], "env": {...}} with two file descriptors,
                        the worker's stdin and its log (stdout and stderr);
  server -> supervisor: {"pid": N} with a pidfd of the new process (a signal to it can never reach
                        a recycled pid), and later {"exit": N, "rc": R}, R as subprocess's returncode
                        (negative: killed by that signal).
The server reaps its children; when its socket closes (the supervisor is done, or dead) it exits, and
its children die with it (PR_SET_PDEATHSIG), as they die with it when it is SIGKILLed.

Its command line names the run (`--run-dir`), and each worker shows its own command line in `ps`
(setproctitle), so leftovers are as easy to find as before.
"""

import argparse
import array
import gc
import json
import os
import runpy
import select
import signal
import socket
import subprocess
import sys
import time
import traceback
from pathlib import Path

MAX_MESSAGE = 1 << 20
FD_ENV = "HARNESS_FORKSERVER_FD"
# The server answers a fork at once; this long without an answer means it is gone or stuck.
REPLY_TIMEOUT_S = 30


def _preload() -> None:
    """Everything a worker imports, imported once here (no client is created: nothing connects)."""
    import confluent_kafka  # noqa: F401
    import confluent_kafka.admin  # noqa: F401
    import psycopg  # noqa: F401
    import psycopg.sql  # noqa: F401
    from ..experiments import REGISTRY  # noqa: F401
    from ..runtime import context
    from . import worker  # noqa: F401
    try:
        import setproctitle  # noqa: F401
    except ImportError:
        pass


def _title(text: str) -> None:
    try:
        import setproctitle
        setproctitle.setproctitle(text)
    except ImportError:
        pass


def _child(sock: socket.socket, wake: tuple, request: dict, stdin_fd: int, log_fd: int, server: int) -> None:
    """In the forked child: become the worker. Never returns. `server` is the server's pid, taken
    before the fork."""
    rc = 1
    try:
        from ..core.procs import die_with
        die_with(server)                 # first: a server that died since the fork takes this child with it
        sock.close()
        for fd in wake:
            os.close(fd)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.dup2(stdin_fd, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.close(stdin_fd)
        os.close(log_fd)
        sys.stdin = open(0, "r", closefd=False)
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        # The title first: setproctitle needs the environment as the process started with it.
        _title(" ".join(request["argv"]))
        env = dict(request["env"])
        from ..core.procs import PARENT_PID_ENV
        env[PARENT_PID_ENV] = str(server)              # this server is the worker's parent now
        os.environ.clear()
        os.environ.update(env)
        # As `python -m MODULE ARGS...` would run it (the worker module, already imported here).
        argv = request["argv"]
        if len(argv) < 3 or argv[1] != "-m":
            raise ValueError(f"not a `python -m MODULE` command line: {argv[:3]}")
        module, args = argv[2], argv[3:]
        sys.argv = [module, *args]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        rc = 0
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001 - a worker's traceback goes to its log, as an interpreter's would
        traceback.print_exc()
        rc = 1
    finally:
        try:
            from ..runtime.history import flush_all
            flush_all()             # os._exit runs no atexit handler: the history's waiting reports first
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(rc if isinstance(rc, int) else 1)


def serve(sock: socket.socket) -> None:
    from ..core.procs import die_with_parent
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # Ctrl-C is the supervisor's to handle
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    _preload()
    gc.freeze()    # the preloaded objects stay out of every collection: their pages stay shared with each child
    children: set = set()
    me = os.getpid()
    while True:
        ready, _, _ = select.select([sock, wake_r], [], [])
        if wake_r in ready:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
        _reap(sock, children)
        if sock not in ready:
            continue
        try:
            data, fds = _recv_fds(sock)
        except OSError:
            return
        if not data:
            return                                   # the supervisor closed its end: done
        request = json.loads(data)
        pid = os.fork()
        if pid == 0:
            _child(sock, (wake_r, wake_w), request, fds[0], fds[1], me)
        for fd in fds:
            os.close(fd)
        children.add(pid)
        pidfd = os.pidfd_open(pid)    # before any reaping: it names this child for good
        try:
            socket.send_fds(sock, [json.dumps({"pid": pid}).encode()], [pidfd])
        except OSError:
            return
        finally:
            os.close(pidfd)


def _recv_fds(sock: socket.socket, flags: int = 0) -> tuple[bytes, list[int]]:
    """One message and the descriptors sent with it. (socket.recv_fds ignores its flags argument
    before Python 3.12, so MSG_DONTWAIT would block there.)"""
    fds = array.array("i")
    data, ancdata, _flags, _addr = sock.recvmsg(MAX_MESSAGE, socket.CMSG_LEN(2 * fds.itemsize), flags)
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
    return data, list(fds)


def _reap(sock: socket.socket, children: set) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            children.clear()
            return
        if pid == 0:
            return
        children.discard(pid)
        try:
            sock.send(json.dumps({"exit": pid, "rc": os.waitstatus_to_exitcode(status)}).encode())
        except OSError:
            pass


# -- the supervisor's end ------------------------------------------------------------------------

class ForkServer:
    """The supervisor's handle on a run's fork server: `spawn` a worker, learn when each one exits."""

    def __init__(self, run_dir: Path, log_path: Path):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        from ..core.procs import PARENT_PID_ENV
        env = {**os.environ, FD_ENV: str(theirs.fileno()), PARENT_PID_ENV: str(os.getpid())}
        from ..core.safefile import open_log
        with open_log(log_path) as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "harness.workers.forkserver", "--run-dir", str(run_dir)],
                env=env, pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        theirs.close()
        self.sock, self.log_path = ours, log_path
        self.exits: dict[int, int] = {}          # pid -> returncode, as the server reported them
        self.gone = False                        # the server's end is closed: it (and every child) is dead

    def spawn(self, argv: list[str], env: dict, log: Path | int, stdin_pipe: bool) -> "ForkedProcess":
        """Fork a process that runs `argv`, a `python -m MODULE ...` command line (our workers'), as
        the interpreter would, with `env` as its whole environment and its output appended to `log`: a
        path, or a descriptor (a capped log's pipe, logcap.py) the caller keeps and closes."""
        if stdin_pipe:
            r, w = os.pipe()
        else:
            r, w = os.open(os.devnull, os.O_RDONLY), None
        log = (os.dup(log) if isinstance(log, int)
               else os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644))
        try:
            socket.send_fds(self.sock, [json.dumps({"argv": argv, "env": env}).encode()], [r, log])
        except OSError as e:
            if w is not None:
                os.close(w)
            raise self._dead(e)
        finally:
            os.close(r)
            os.close(log)
        deadline = time.monotonic() + REPLY_TIMEOUT_S
        while True:
            reply, fds = self._receive(timeout=max(0.0, deadline - time.monotonic()))
            if reply is None:
                if w is not None:
                    os.close(w)
                raise self._dead(None)
            if "pid" in reply:
                # An exit recorded for this pid is an earlier process's whose report nobody took (a
                # spare never used): the kernel gave the pid again only after the server reaped it.
                self.exits.pop(reply["pid"], None)
                stdin = open(w, "wb") if w is not None else None
                return ForkedProcess(self, reply["pid"], fds[0], argv, stdin)

    def collect(self) -> None:
        """Take every exit the server reported so far (never blocks)."""
        while not self.gone:
            try:
                reply, _fds = self._receive(timeout=None, block=False)
            except BlockingIOError:
                return
            if reply is None:
                return

    def _receive(self, timeout, block: bool = True):
        """One message: (dict, fds), or (None, []) once the server is gone. An exit is recorded here."""
        if self.gone:
            return None, []
        if block:
            ready, _, _ = select.select([self.sock], [], [], timeout)
            if not ready:
                return None, []
        try:
            data, fds = _recv_fds(self.sock, 0 if block else socket.MSG_DONTWAIT)
        except BlockingIOError:
            raise
        except OSError:                  # reset: the server died with our request unread
            data, fds = b"", []
        if not data:
            self.gone = True
            return None, []
        msg = json.loads(data)
        if "exit" in msg:
            self.exits[msg["exit"]] = msg["rc"]
        return msg, fds

    def _dead(self, cause) -> Exception:
        from ..core.errors import HarnessError
        self.gone = True
        return HarnessError(f"the worker fork server stopped answering ({cause or 'no reply'}); "
                            f"see {self.log_path}")

    def close(self) -> None:
        """Close our end: the server exits, and any worker still alive dies with it."""
        self.gone = True
        try:
            self.sock.close()
        finally:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class ForkedProcess:
    """A forked worker, with what the supervisor uses of subprocess.Popen: pid, args, stdin, poll,
    wait, send_signal, kill, terminate, returncode. Signals go through a pidfd: never to a recycled pid."""

    def __init__(self, server: ForkServer, pid: int, pidfd: int, args: list[str], stdin):
        self.server, self.pid, self.pidfd, self.args, self.stdin = server, pid, pidfd, args, stdin
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.server.collect()
            if self.pid in self.server.exits:
                self._ended(self.server.exits.pop(self.pid))
            elif self.server.gone and select.select([self.pidfd], [], [], 0)[0]:
                self._ended(-signal.SIGKILL)         # it died with its server (PR_SET_PDEATHSIG)
        return self.returncode

    def _ended(self, rc: int) -> None:
        self.returncode = rc
        os.close(self.pidfd)
        if self.stdin is not None and not self.stdin.closed:
            try:
                self.stdin.close()
            except OSError:
                pass

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(0.005)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                signal.pidfd_send_signal(self.pidfd, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="harness-worker-forkserver")
    ap.add_argument("--run-dir", required=True, help="the run whose workers this serves (for ps)")
    ap.parse_args(argv)
    fd = int(os.environ.pop(FD_ENV))
    sock = socket.socket(fileno=fd)
    serve(sock)
    return 0


if __name__ == "__main__":
    sys.exit(main())
