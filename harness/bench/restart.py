"""Restart latency by strategy: SIGKILL a consumer, start its replacement at once, time the first record.

For each strategy, consumer processes (harness.bench.restart_worker) take
turns on one partition with records always available: a consumer processes a
few records, committing each one synchronously, then idles as a live member;
the benchmark SIGKILLs it and starts a replacement immediately. The latency is
from just before the SIGKILL to the replacement's first record (both clocks
are this machine's wall clock), so it includes the replacement's interpreter
start-up, the same for every strategy, which is reported separately.

Correctness, per kill: the replacement's first offset must equal the offset
its predecessor had committed (no record skipped, none processed twice); at
the end, the group's committed offset read back from the broker must equal
the last consumer's, and must have advanced by the records processed.

Strategies:
  classic-default  classic group protocol, subscribe(), default session.timeout.ms (45 s): the
                   dead member keeps the partition until its session expires
  classic-short    the same with session.timeout.ms=1000, heartbeat.interval.ms=300
  static           classic + static membership: group.instance.id stable across the restart
                   (session.timeout.ms=10000); the replacement takes over the member at once
  assign           manual assign() of the partition at the group's committed offset, no
                   membership (what the harness workers do)
  kip848           the consumer group protocol (group.protocol=consumer, KIP-848); its session
                   timeout is the broker's group.consumer.session.timeout.ms
"""

import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..core import safefile
from ..runtime import crashlog
from ..core.errors import HarnessError
from ..stack.stack import Stack

DEFAULT_KILLS = 5
SLOW_KILLS = 3                # classic-default waits ~45 s per kill: at most this many kills
WAIT_CAP_S = 60.0             # a replacement with no record after this long is reported as timed out
READY_CAP_S = 60.0            # the first consumer's join, and each consumer's few records
PER_CONSUMER = 5              # records each consumer processes before it is killed
TOPIC_RECORDS = 5000
POLL_S = 0.005


@dataclass(frozen=True)
class Strategy:
    name: str
    label: str
    config: dict
    manual_assign: bool = False
    slow: bool = False
    expect: str = ""


STRATEGIES = [
    Strategy("classic-default", "classic protocol, default session timeout (45 s)",
             {"group.protocol": "classic"}, slow=True,
             expect="about session.timeout.ms: the dead member holds the partition until its session expires"),
    Strategy("classic-short", "classic protocol, session.timeout.ms=1000, heartbeat.interval.ms=300",
             {"group.protocol": "classic", "session.timeout.ms": 1000, "heartbeat.interval.ms": 300},
             expect="about 1 s: the short session expires, then one rebalance"),
    Strategy("static", "static membership (stable group.instance.id, session.timeout.ms=10000)",
             {"group.protocol": "classic", "session.timeout.ms": 10000},
             expect="well under a second: the coordinator hands the member's assignment to its replacement"),
    Strategy("assign", "manual assign() at the group's committed offset (harness workers)", {},
             manual_assign=True, expect="well under a second: no membership, no rebalance"),
    Strategy("kip848", "consumer group protocol (group.protocol=consumer, KIP-848)",
             {"group.protocol": "consumer"},
             expect="about the broker's group.consumer.session.timeout.ms"),
]
BY_NAME = {s.name: s for s in STRATEGIES}

METHOD = ("Per strategy, one consumer process at a time on a 1-partition topic with {records} records waiting. "
          "Each consumer processes {per} records (synchronous commit per record), pauses and idles as a live "
          "member; the benchmark sends SIGKILL and starts the replacement process immediately. Latency = "
          "replacement's first record received (its own clock) minus the time just before the SIGKILL (same "
          "machine). startup_seconds = spawn to consumer object created (interpreter, imports); "
          "client_seconds = from there to the first record (coordinator, join or offset fetch, first fetch). "
          "A wait longer than {cap:.0f} s is a timeout. Correct = every replacement's first offset equals its "
          "predecessor's committed offset and the group's committed offset on the broker ends at the "
          "expected value.")


def parse_strategies(text: str | None) -> list[Strategy]:
    if not text:
        return list(STRATEGIES)
    out = []
    for name in [x.strip() for x in text.split(",") if x.strip()]:
        if name not in BY_NAME:
            raise HarnessError(f"unknown restart strategy {name!r}; choose from: {', '.join(BY_NAME)}")
        out.append(BY_NAME[name])
    if not out:
        raise HarnessError("--strategies names no strategy")
    return out


@dataclass
class _Proc:
    proc: subprocess.Popen
    spawned: float
    events: dict = field(default_factory=dict)


class _Run:
    """The consumers of one strategy: spawn, watch their events, kill them; never leaves one behind."""

    def __init__(self, strategy: Strategy, stack: Stack, topic: str, group: str, folder: Path, per_consumer: int):
        self.s, self.stack, self.topic, self.group = strategy, stack, topic, group
        self.folder = folder
        self.events_path = folder / f"{strategy.name}.events.jsonl"
        self.per = per_consumer
        self.procs: list[_Proc] = []
        self._pos = 0
        config = dict(strategy.config)
        if strategy.name == "static":
            config["group.instance.id"] = f"{group}-member-0"
        self.config = config

    def spawn(self) -> _Proc:
        n = len(self.procs)
        cmd = [sys.executable, "-m", "harness.bench.restart_worker", "--strategy", self.s.name,
               "--bootstrap", self.stack.bootstrap_servers, "--topic", self.topic, "--group", self.group,
               "--events", str(self.events_path), "--process", str(self.per), "--config", json.dumps(self.config)]
        if self.s.manual_assign:
            cmd.append("--manual-assign")
        with safefile.open_log(self.folder / f"{self.s.name}-{n}.log") as log:
            p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        rec = _Proc(p, time.time())
        self.procs.append(rec)
        return rec

    def _read(self) -> None:
        data, self._pos = crashlog.tail(self.events_path, self._pos)
        for line in data.splitlines():
            ev = json.loads(line)
            for r in self.procs:
                if r.proc.pid == ev.get("pid"):
                    r.events.setdefault(ev["event"], ev)

    def wait(self, rec: _Proc, event: str, deadline: float) -> dict | None:
        while time.time() < deadline:
            self._read()
            if event in rec.events:
                return rec.events[event]
            if rec.proc.poll() is not None:
                self._read()
                if event in rec.events:
                    return rec.events[event]
                raise HarnessError(f"restart benchmark: a {self.s.name} consumer exited with {rec.proc.returncode}; "
                                   f"see {self.folder}/{self.s.name}-{self.procs.index(rec)}.log")
            time.sleep(POLL_S)
        return None

    def kill_all(self) -> None:
        for r in self.procs:
            if r.proc.poll() is None:
                r.proc.kill()
        for r in self.procs:
            try:
                r.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass


def committed_offset(stack: Stack, topic: str, group: str) -> int:
    """The group's committed offset of partition 0, read back from the broker (no membership)."""
    from confluent_kafka import Consumer, TopicPartition
    from ..clients import kafka_client
    c = Consumer(kafka_client.config(stack.bootstrap_servers, {"group.id": group, "enable.auto.commit": False,
                                                               "log_level": 3}))
    try:
        from .restart_worker import _retrying
        return _retrying(lambda: c.committed([TopicPartition(topic, 0)], timeout=15))[0].offset
    finally:
        c.close()


def run_strategy(strategy: Strategy, stack: Stack, topic: str, group: str, kills: int, folder: Path,
                 per_consumer: int = PER_CONSUMER, wait_cap: float = WAIT_CAP_S, log=print) -> dict:
    run = _Run(strategy, stack, topic, group, folder, per_consumer)
    rows: list[dict] = []
    readies: list[int] = []          # each consumer's committed offset when it was killed
    t0 = time.time()
    try:
        cur = run.spawn()
        ready = run.wait(cur, "ready", time.time() + READY_CAP_S)
        if ready is None:
            raise HarnessError(f"restart benchmark: the first {strategy.name} consumer did not get "
                               f"{per_consumer} records in {READY_CAP_S:.0f} s; see {folder}")
        readies.append(ready["committed"])
        start_committed = cur.events["first"]["offset"]
        join_seconds = cur.events["first"]["t"] - cur.spawned
        for k in range(1, kills + 1):
            expected = ready["committed"]
            t_kill = time.time()
            cur.proc.kill()
            nxt = run.spawn()                      # at once; the victim is reaped afterwards
            cur.proc.wait()
            first = run.wait(nxt, "first", t_kill + wait_cap)
            if first is None:
                rows.append({"kill": k, "seconds": None, "timed_out": True, "cap_seconds": wait_cap,
                             "expected_offset": expected, "first_offset": None, "ok": None})
                log(f"  {strategy.name}: kill {k}: no record within {wait_cap:.0f} s (timeout)")
                break
            started = nxt.events.get("started") or first
            row = {"kill": k, "seconds": round(first["t"] - t_kill, 3),
                   "startup_seconds": round(started["t"] - nxt.spawned, 3),
                   "client_seconds": round(first["t"] - started["t"], 3),
                   "timed_out": False, "expected_offset": expected, "first_offset": first["offset"],
                   "ok": first["offset"] == expected}
            rows.append(row)
            log(f"  {strategy.name}: kill {k}: first record after {row['seconds']:.3f} s "
                f"(offset {first['offset']}, expected {expected})")
            cur = nxt
            ready = run.wait(cur, "ready", time.time() + READY_CAP_S)
            if ready is None:
                raise HarnessError(f"restart benchmark: a {strategy.name} replacement stalled after its first record")
            readies.append(ready["committed"])
        run.kill_all()
        end_committed = committed_offset(stack, topic, group)
    finally:
        run.kill_all()

    measured = [r["seconds"] for r in rows if r["seconds"] is not None]
    timeouts = sum(1 for r in rows if r["timed_out"])
    steps = [b - a for a, b in zip([start_committed] + readies, readies)]
    # A timed-out replacement may still have committed a few records before it was killed.
    progress_ok = all(d == per_consumer for d in steps) and \
        (end_committed == readies[-1] if not timeouts else end_committed >= readies[-1])
    offsets_ok = all(r["ok"] for r in rows if not r["timed_out"])
    return {
        "strategy": strategy.name,
        "label": strategy.label,
        "config": run.config | ({"assign": "manual, at committed offset"} if strategy.manual_assign else {}),
        "expect": strategy.expect,
        "kills_requested": kills,
        "kills": rows,
        "measured": len(measured),
        "timeouts": timeouts,
        "median_seconds": round(statistics.median(measured), 3) if measured else None,
        "max_seconds": max(measured) if measured else None,
        "min_seconds": min(measured) if measured else None,
        "median_startup_seconds": _median([r.get("startup_seconds") for r in rows]),
        "median_client_seconds": _median([r.get("client_seconds") for r in rows]),
        "first_join_seconds": round(join_seconds, 3),
        "committed": {"start": start_committed, "end": end_committed, "after_each_consumer": readies},
        "no_skips": offsets_ok,
        "progress": progress_ok,
        "correct": bool(offsets_ok and progress_ok and rows),
        "wall_seconds": round(time.time() - t0, 1),
    }


def _median(xs):
    xs = [x for x in xs if x is not None]
    return round(statistics.median(xs), 3) if xs else None


def fastest_correct(results: list[dict]) -> str | None:
    ok = [r for r in results if r["correct"] and not r["timeouts"] and r["median_seconds"] is not None]
    return min(ok, key=lambda r: r["median_seconds"])["strategy"] if ok else None


def run_restart(stack: Stack, bench_id: str, folder: Path, strategies: list[Strategy], kills: int = DEFAULT_KILLS,
                slow_kills: int = SLOW_KILLS, per_consumer: int = PER_CONSUMER, wait_cap: float = WAIT_CAP_S,
                topic_records: int = TOPIC_RECORDS, keep_data: bool = False, log=print) -> dict:
    from ..workload.naming import RunNames
    from ..workload.payments import make_payments, create_topic, produce
    from .common import broker_settings, clean_run
    folder.mkdir(parents=True, exist_ok=True)
    run_id = f"{bench_id}-restart"
    topic = RunNames(run_id).input_topic
    needed = sum((min(kills, slow_kills) if s.slow else kills) + 1 for s in strategies) * per_consumer
    records = max(topic_records, needed * 2)
    t0 = time.time()
    create_topic(stack.bootstrap_servers, topic, 1)
    produce(stack.bootstrap_servers, topic, make_payments(records, 100))
    log(f"restart: {records} records on {topic}; strategies {', '.join(s.name for s in strategies)}")
    results = []
    try:
        for s in strategies:
            group = f"{RunNames(run_id).group}-{s.name}"
            committed_offset(stack, topic, group)    # the group's coordinator is up before anything is timed
            k = min(kills, slow_kills) if s.slow else kills
            log(f"restart: {s.name} ({s.label}), {k} kills")
            results.append(run_strategy(s, stack, topic, group, k, folder,
                                        per_consumer, wait_cap, log))
    finally:
        if not keep_data:
            clean_run(stack, run_id)
    return {
        "method": METHOD.format(records=records, per=per_consumer, cap=wait_cap),
        "parameters": {"kills": kills, "slow_kills": slow_kills, "per_consumer": per_consumer,
                       "wait_cap_seconds": wait_cap, "topic_records": records, "topic": topic, "partitions": 1,
                       "strategies": [s.name for s in strategies]},
        "broker_settings": broker_settings(stack),
        "strategies": results,
        "fastest_correct": fastest_correct(results),
        "wall_seconds": round(time.time() - t0, 1),
        "run_id": run_id,
        "kept_data": keep_data,
    }
