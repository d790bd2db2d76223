"""The supervisor: the only thing that starts, restarts and kills worker processes.

It runs one process per worker slot, restarts a slot whose worker died
(SIGKILL at a kill point, a fenced producer, or a transactional call stuck
past its deadline, exit 4 with its `txn_stuck` event) until every slot has finished
its partitions (at once, or `--restart-delay` seconds after the death: a slow
redelivery), and enforces a global time limit so a stuck run ends as
`incomplete` instead of hanging. It ticks the run's faults (faults/base.py)
on every turn of its loop and keeps the run open while one is mid-story;
what the faults do is theirs to say. On Ctrl-C, SIGTERM or
any error it kills every worker before returning; workers also die with the
supervisor's process if it is itself SIGKILLed (PR_SET_PDEATHSIG). A worker's
descendant that left its process group is still found and ended at the end
(workers/leftovers.py: the run is a child subreaper meanwhile), and counted.
"""

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..core import safefile
from . import leftovers
from .logcap import CappedLog
from ..core.procs import PARENT_PID_ENV
from ..runtime import crashlog
from ..runtime.call_deadline import STUCK_EXIT

# A worker that fails this many times without being killed on purpose is broken: stop restarting it.
MAX_UNPLANNED_FAILURES = 5
TICK_S = 0.01


@dataclass
class Slot:
    index: int
    name: str
    attempt: int = 0
    proc: subprocess.Popen | None = None
    started_at: float = 0.0
    first_message_at: float | None = None
    finished: bool = False
    unplanned_failures: int = 0
    stuck_in_a_row: int = 0              # attempts ended by their call deadline with no record handled between
    restart_at: float | None = None      # a dead worker's successor starts at this time (--restart-delay)
    has_work: bool = True                # False once a launcher sees it has nothing left (a random kill spares it)


@dataclass
class SupervisorResult:
    status: str                      # "complete", "incomplete" (time limit or broken worker), "interrupted"
    restarts: int = 0
    unplanned_deaths: list = field(default_factory=list)   # {worker, attempt, exit_code, time}: not a fault's doing
    killed_at_stop: list = field(default_factory=list)   # {worker, attempt, pid, time}: busy workers SIGKILLed
                                                          # where they stood because the run stopped (interrupt, time limit)
    unrestarted_at_stop: list = field(default_factory=list)   # {worker, attempt, time}: attempts that had ended (a
                                                               # described crash) with no successor yet at the stop
    reason: str | None = None
    gave_up_on: str | None = None    # the worker slot that failed MAX_UNPLANNED_FAILURES times
    wall_seconds: float = 0.0
    events: list = field(default_factory=list)    # every worker event, in order
    left_behind: list | None = field(default_factory=list)   # {pid, command}: workers' descendants ended at the
                                                              # end (leftovers.py); None when not looked for
    log_bytes_dropped: dict | None = None   # slot -> bytes its capped log dropped (None: unknown); None: not capped

    @property
    def killed_at_end(self) -> int:
        """How many workers the stop SIGKILLed mid-work: undescribed crashes for the prediction."""
        return len(self.killed_at_stop)


class Supervisor:
    def __init__(self, run_dir: Path, slots: int, command: Callable[[Slot], list[str]], env: dict,
                 time_limit: float, crash_log: Path, events_path: Path,
                 faults: list | None = None,
                 progress: Callable[[dict], None] | None = None,
                 group_done: Callable[[], bool] | None = None,
                 standby: bool = False, names: list | None = None,
                 watch: Callable[["Supervisor"], None] | None = None,
                 may_exit: Callable[[Slot], bool] | None = None,
                 planned_exits: tuple = (-signal.SIGKILL, 137, 3),
                 restart_delay: float = 0.0, own_process_group: bool = False, forked: bool = False):
        self.run_dir = run_dir
        self.slots = [Slot(i, names[i] if names else f"w{i}") for i in range(slots)]
        self.command, self.env = command, env
        self.time_limit = time_limit
        self.crash_log, self.events_path = crash_log, events_path
        self.faults = list(faults or [])
        self.progress = progress
        self.group_done = group_done
        self.logs = run_dir / "workers"
        self.logs.mkdir(parents=True, exist_ok=True)
        self._events_pos = 0
        self.adopted: list[subprocess.Popen] = []    # processes no slot owns any more (a zombie), killed at the end
        self.standby = standby                        # workers understand --standby: keep a warm spare per slot
        self.spares: dict[int, subprocess.Popen] = {}
        self.restart_delay = restart_delay            # seconds a dead worker's slot stays empty before its successor
        self.watch = watch            # called on every turn of the loop: a launcher observing its workers
        self.may_exit = may_exit      # may this slot's worker exit 0 now? (None: whenever it likes)
        self.planned_exits = planned_exits    # exit statuses that are a crash to restart, not a failure
        # Each worker leads its own process group, SIGKILLed as a whole once the worker is gone, so that
        # the children a worker forks (a user's consumer may run a shell, a helper) do not outlive it.
        self.own_process_group = own_process_group
        # Our own Python workers are forked from a server that imported their libraries once
        # (workers/forkserver.py): a restart costs a fork, not an interpreter's start-up.
        self.forked = forked
        self.forkserver = None
        # Our own Python workers dump their stacks on SIGUSR1 (workers/worker.py); a user's process may
        # die of it, so only forked (our own) workers are asked.
        self.dump_signal = signal.SIGUSR1 if forked else None
        self.result = SupervisorResult(status="running")
        leftovers.own_token()                     # in the environment of every process the harness starts
        self.before: set | None = None            # this process's children when the workers started
        self.token = leftovers.new_token()        # in every worker's environment: its descendants carry it
        self.capped: dict[str, CappedLog] = {}    # a user's process writes to a pipe, its slot's log is capped

    # -- processes ------------------------------------------------------------------------
    def start(self, slot: Slot) -> None:
        slot.attempt += 1
        slot.first_message_at = None
        slot.has_work = True
        if not self.standby:
            slot.proc = self._spawn(slot, self.command(slot))
        else:
            spare = self.spares.pop(slot.index, None)
            if spare is None or spare.poll() is not None:
                spare = self._spawn(slot, self.command(slot) + ["--standby"], stdin=subprocess.PIPE)
            try:
                # The spare learns its real command line (this attempt's) as one JSON line.
                spare.stdin.write((json.dumps(self.command(slot)) + "\n").encode())
                spare.stdin.close()
            except OSError:
                spare.kill()
                spare = self._spawn(slot, self.command(slot))
            slot.proc = spare
            # The next successor warms up while this worker runs.
            self.spares[slot.index] = self._spawn(slot, self.command(slot) + ["--standby"], stdin=subprocess.PIPE)
        slot.started_at = time.time()

    def restart(self, slot: Slot, now: float) -> None:
        """Start the slot's successor now, or after --restart-delay (the loop starts it when due)."""
        self.result.restarts += 1
        if self.restart_delay > 0:
            slot.restart_at = now + self.restart_delay
        else:
            self.start(slot)

    def _spawn(self, slot: Slot, cmd: list[str], stdin=subprocess.DEVNULL) -> subprocess.Popen:
        # The worker checks, once it can, that we are still its parent (procs.die_with_parent).
        env = self.env(slot) if callable(self.env) else self.env    # a dict, or per slot and attempt
        env = {**{k: v for k, v in env.items() if k != leftovers.OWN_ENV}, PARENT_PID_ENV: str(os.getpid()),
               leftovers.TOKEN_ENV: self.token}
        if self.forked:
            if self.forkserver is None:
                from .forkserver import ForkServer
                self.forkserver = ForkServer(self.run_dir, self.logs / "forkserver.log")
        if not self.own_process_group and not self.forked:   # a Kafka Streams JVM: its log as it is
            with safefile.open_log(self.logs / f"{slot.name}.log") as log:
                return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=stdin)
        if slot.name not in self.capped:      # a user's consumer or a forked worker: its log is capped (logcap.py)
            self.capped[slot.name] = CappedLog(self.logs / f"{slot.name}.log")
        out = self.capped[slot.name].pipe()
        try:
            if self.forked:
                return self.forkserver.spawn(cmd, env, out, stdin_pipe=stdin == subprocess.PIPE)
            return subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=stdin, process_group=0)
        finally:
            os.close(out)

    def _ask_for_stacks(self) -> None:
        """Our own workers write their threads' stacks to their logs on `dump_signal` (faulthandler): a run
        stopped with a worker still busy then shows where it stood. A short wait, then the kill goes on."""
        asked = False
        for s in self.slots:
            if s.proc and not s.finished and s.proc.poll() is None:
                try:
                    s.proc.send_signal(self.dump_signal)
                    asked = True
                except OSError:
                    pass
        if asked:
            time.sleep(0.5)

    def _sweep(self, proc: subprocess.Popen) -> None:
        """SIGKILL what is left of a dead worker's process group (its children), when it has its own."""
        if self.own_process_group and proc.returncode is not None and not getattr(proc, "swept", False):
            proc.swept = True          # once only: an empty group's id may later be another's
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def adopt(self, proc: subprocess.Popen) -> None:
        self.adopted.append(proc)

    def kill_all(self) -> None:
        procs = [s.proc for s in self.slots if s.proc] + self.adopted + list(self.spares.values())
        for p in procs:
            if p.poll() is None:
                p.kill()               # SIGKILL also ends a SIGSTOPped process
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            self._sweep(p)
        if self.forkserver is not None:
            self.forkserver.close()
        # What the workers started and left (a child that called setsid), now that no worker can start more.
        self.result.left_behind = leftovers.end(self.token, keep={p.pid for p in procs if p.poll() is None},
                                                before=self.before)
        if self.capped:
            self.result.log_bytes_dropped = {name: log.join() for name, log in self.capped.items()}

    def terminate_all(self, grace: float = 15.0) -> None:
        for s in self.slots:
            if s.proc and s.proc.poll() is None:
                s.proc.terminate()
        deadline = time.time() + grace
        for s in self.slots:
            if s.proc:
                try:
                    s.proc.wait(timeout=max(0.1, deadline - time.time()))
                except subprocess.TimeoutExpired:
                    s.proc.kill()
                    s.proc.wait()

    def _give_up(self, s: Slot, rc: int) -> bool:
        """A slot that failed MAX_UNPLANNED_FAILURES times ends the run as incomplete, saying where to look; or
        naming what the stack's watch sees dead now (its PostgreSQL killed: workers fail faster than it looks)."""
        if s.unplanned_failures < MAX_UNPLANNED_FAILURES:
            return False
        for f in self.faults:
            getattr(f, "look_now", lambda: None)()
        dead = next((why for f in self.faults if (why := f.stops_run())), None)
        self.result.status, self.result.gave_up_on = "incomplete", None if dead else s.name
        self.result.reason = dead or (f"worker {s.name} failed {s.unplanned_failures} times "
                                      f"(exit {rc}); see {self.logs / (s.name + '.log')}")
        return True

    def _described(self, s: Slot, rc: int) -> bool:
        """Does the worker's own record explain this death: a crash record, or the event its exit status
        promises (fenced; stuck: only when its txn_stuck event is there)?"""
        if rc == 3:
            return True
        if rc == STUCK_EXIT:
            self._read_events()
            return any(e.get("event") == "txn_stuck" and e.get("worker") == s.name and e.get("attempt") == s.attempt
                       for e in self.result.events)
        return self._crash_recorded(s)

    def _crash_recorded(self, s: Slot) -> bool:
        return any(c.get("worker") == s.name and c.get("attempt") == s.attempt for c in crashlog.read(self.crash_log))

    # -- events ---------------------------------------------------------------------------
    def _read_events(self) -> None:
        data, self._events_pos = crashlog.tail(self.events_path, self._events_pos)
        for line in data.splitlines():
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            self.result.events.append(ev)
            if ev.get("event") == "first_message":
                for s in self.slots:
                    if s.name == ev.get("worker") and s.attempt == ev.get("attempt"):
                        s.first_message_at = ev["t"]

    # -- main loop ------------------------------------------------------------------------
    def run(self) -> SupervisorResult:
        t0 = time.time()
        deadline = t0 + self.time_limit
        last_progress = 0.0
        subreaper = leftovers.subreaper(True)     # an orphaned descendant of a worker becomes our child
        self.before = leftovers.children() if subreaper else None
        try:
            for s in self.slots:
                self.start(s)
            while not all(s.finished for s in self.slots) or any(f.busy() for f in self.faults):
                now = time.time()
                if now > deadline:
                    self.result.status, self.result.reason = "incomplete", f"time limit of {self.time_limit:.0f} s reached"
                    break
                self._read_events()
                if self.watch:
                    self.watch(self)
                for s in self.slots:
                    if s.finished:
                        continue
                    if s.restart_at is not None:
                        if now >= s.restart_at:
                            s.restart_at = None
                            self.start(s)
                        continue
                    rc = s.proc.poll()
                    if rc is None:
                        continue
                    self._sweep(s.proc)
                    if rc == 0 and (self.may_exit is None or self.may_exit(s)):
                        s.finished = True
                    elif rc in self.planned_exits:      # SIGKILL; with our workers also Java halt(137), fenced, stuck
                        if not self._described(s, rc):
                            # Killed, but by no fault of ours (the OOM killer, a user's kill -9): say so.
                            self.result.unplanned_deaths.append({"worker": s.name, "attempt": s.attempt,
                                                                 "exit_code": rc, "time": round(now, 3)})
                        if rc == STUCK_EXIT:
                            # Described by its event; but a slot that gets stuck again and again without
                            # handling a record in between is broken: stop, rather than wait out the time limit.
                            s.stuck_in_a_row = 1 if s.first_message_at else s.stuck_in_a_row + 1
                            if s.stuck_in_a_row >= MAX_UNPLANNED_FAILURES:
                                self.result.status, self.result.gave_up_on = "incomplete", s.name
                                self.result.reason = (f"worker {s.name} got stuck in a transactional call "
                                                      f"{s.stuck_in_a_row} times in a row without handling a "
                                                      f"record; see {self.logs / (s.name + '.log')}")
                                break
                        self.restart(s, now)
                    else:
                        s.unplanned_failures += 1
                        self.result.unplanned_deaths.append({"worker": s.name, "attempt": s.attempt,
                                                             "exit_code": rc, "time": round(now, 3)})
                        if self._give_up(s, rc):
                            break
                        self.restart(s, now)
                if self.result.status == "incomplete":
                    break
                for f in self.faults:
                    f.tick(self)
                stop = next((why for f in self.faults if (why := f.stops_run())), None)
                if stop:
                    self.result.status, self.result.reason = "incomplete", stop
                    break
                if (self.progress or self.group_done) and now - last_progress > 0.5:
                    last_progress = now
                    if self.group_done and self.group_done():
                        self.terminate_all()
                        for s in self.slots:
                            s.finished = True
                    if self.progress:
                        self.progress({"restarts": self.result.restarts,
                                       "crashes": len(crashlog.read(self.crash_log))})
                time.sleep(TICK_S)
            else:
                self.result.status = "complete"
        except KeyboardInterrupt:
            self.result.status, self.result.reason = "interrupted", "interrupted by the user"
        finally:
            if self.result.status != "complete":
                now = round(time.time(), 3)
                # Busy workers killed where they stood: their in-flight records are unknown. One whose attempt
                # already wrote its crash record is not among them: it was dying at its point, described, and
                # only its exit was not seen yet (a forked worker's comes through the fork server).
                self.result.killed_at_stop = [{"worker": s.name, "attempt": s.attempt, "pid": s.proc.pid, "time": now}
                                              for s in self.slots if s.proc and not s.finished
                                              and s.proc.poll() is None and not self._crash_recorded(s)]
                # Attempts already ended (or dying at their point) whose successor had not started: a successor
                # would have fenced what they left open; the stop came first, so the run fences it instead.
                killed = {x["worker"] for x in self.result.killed_at_stop}
                self.result.unrestarted_at_stop = [{"worker": s.name, "attempt": s.attempt, "time": now}
                                                   for s in self.slots if s.proc and not s.finished
                                                   and s.name not in killed]
                if self.result.status == "incomplete" and self.dump_signal:
                    self._ask_for_stacks()
            self.kill_all()
            if subreaper:
                leftovers.subreaper(False)
            for f in self.faults:
                f.run_end = (self.result.status, self.result.reason)
                f.finish(self)
            self._read_events()
            self.result.wall_seconds = time.time() - t0
        return self.result


def install_sigterm_as_interrupt(on_first=None) -> None:
    """Make SIGTERM and SIGHUP behave like Ctrl-C, once: the first of these signals (or Ctrl-C) raises
    KeyboardInterrupt so the workers are stopped and an interrupted report is written; later ones are
    ignored until that is done (a suite's SIGTERM right after the terminal's SIGINT, or a second
    Ctrl-C, must not cost the run its report). SIGKILL still ends everything, workers included.
    `on_first()`, when given, runs first: it says at once that the run is stopping."""
    state = {"interrupted": False}

    def handler(signum, frame):
        if state["interrupted"]:
            return
        state["interrupted"] = True
        if on_first is not None:
            on_first()
        raise KeyboardInterrupt
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        try:
            signal.signal(sig, handler)
        except ValueError:
            pass

