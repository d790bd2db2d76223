#!/usr/bin/env python3
"""Smoke test of target/eos-streams.jar against the running local stack.

Creates a 1-partition input and output topic with unique names, produces N
payments, plans crashes for K of them, then runs the jar in a loop: a run that
halts with 137 (planned crash) is restarted with attempt+1; once the output,
read with isolation.level=read_committed, holds all N ids, the running
instance gets SIGTERM and must exit 0. Then it checks:

  * read_committed output: exactly N records, N distinct ids (no duplicate);
  * read_uncommitted output: N + sum(len(unacked)) records (the aborted copies);
  * the crash log: K lines, one per planned id;
  * with the ledger (default when a Postgres password is found): N + sum(len(unacked))
    rows, i.e. the external effect is duplicated exactly for the unacked ids.

and prints timings: JVM start -> RUNNING -> first record, and the restart
latency (crash line time -> first record processed by the next instance).

    cd streams-worker && mvn -q package && python3 smoke.py
"""

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

HERE = Path(__file__).resolve().parent


def log(msg: str) -> None:
    print(f"[smoke {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def pg_password(repo: Path) -> str | None:
    if os.environ.get("HARNESS_PG_PASSWORD"):
        return os.environ["HARNESS_PG_PASSWORD"]
    f = Path(os.environ.get("HARNESS_HOME", repo / ".harness")) / "postgres.password"
    return f.read_text().strip() if f.exists() else None


def create_topics(admin: AdminClient, names: list[str]) -> None:
    futs = admin.create_topics([NewTopic(n, num_partitions=1, replication_factor=1) for n in names],
                               operation_timeout=30)
    for f in futs.values():
        f.result(timeout=30)


def delete_topics(admin: AdminClient, names: list[str]) -> None:
    for f in admin.delete_topics(names, operation_timeout=30).values():
        try:
            f.result(timeout=30)
        except Exception as e:   # best effort
            log(f"delete topic: {e}")


def delete_group(admin: AdminClient, group: str, wait_s: float = 15.0) -> None:
    """The static member stays in the group for its session timeout (6 s) after a clean close."""
    deadline = time.time() + wait_s
    while True:
        try:
            admin.delete_consumer_groups([group], request_timeout=10)[group].result(timeout=15)
            return
        except Exception as e:
            if time.time() > deadline:
                log(f"delete group {group}: {e}")
                return
            time.sleep(1.0)


def read_all(bootstrap: str, topic: str, isolation: str, timeout_s: float = 20.0) -> list[tuple[str, dict]]:
    """Every record of partition 0 up to its end (the LSO for read_committed)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"smoke-reader-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "isolation.level": isolation,
                  "enable.partition.eof": True, "auto.offset.reset": "earliest", "log_level": 3})
    c.assign([TopicPartition(topic, 0, 0)])
    out, deadline = [], time.time() + timeout_s
    try:
        while time.time() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191:   # _PARTITION_EOF
                    break
                raise RuntimeError(m.error())
            out.append((m.key().decode(), json.loads(m.value())))
    finally:
        c.close()
    return out


class CommittedWatcher(threading.Thread):
    """Follows the output with read_committed and notes when each distinct id first appears."""

    def __init__(self, bootstrap: str, topic: str):
        super().__init__(daemon=True)
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"smoke-watch-{uuid.uuid4().hex[:8]}",
                           "enable.auto.commit": False, "isolation.level": "read_committed",
                           "auto.offset.reset": "earliest", "fetch.wait.max.ms": 50, "log_level": 3})
        self.c.assign([TopicPartition(topic, 0, 0)])
        self.seen: dict[str, float] = {}
        self.records = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            m = self.c.poll(0.2)
            if m is None or m.error():
                continue
            self.records += 1
            self.seen.setdefault(m.key().decode(), time.time())
        self.c.close()


class Run:
    """One JVM: its stderr is timestamped line by line (RUNNING, FIRST-RECORD, CRASH...)."""

    def __init__(self, cmd: list[str], env: dict, attempt: int, logfile: Path):
        self.attempt = attempt
        self.t_spawn = time.time()
        self.proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        self.t_running = None
        self.first_record_time = None     # from the jar's own FIRST-RECORD line
        self.t_exit = None
        self.lines: list[str] = []
        self.logfile = logfile
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        with open(self.logfile, "a") as f:
            for line in self.proc.stderr:
                now = time.time()
                line = line.rstrip("\n")
                self.lines.append(line)
                f.write(f"{now:.3f} attempt={self.attempt} {line}\n")
                f.flush()
                if line.startswith("eos-streams RUNNING") and self.t_running is None:
                    self.t_running = now
                elif line.startswith("eos-streams FIRST-RECORD"):
                    self.first_record_time = float(line.rsplit("time=", 1)[1])


class Workspace:
    """One smoke run's topics, consumer group, ledger table and work folder; `close` removes them."""

    def __init__(self, args, name: str):
        repo = HERE.parent.parent
        uniq = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"
        self.keep = args.keep
        self.app_id = f"{name}-eos-streams-{uniq}"
        self.topic_in, self.topic_out = f"{name}.eos-streams.{uniq}.input", f"{name}.eos-streams.{uniq}.output"
        self.work = Path(tempfile.mkdtemp(prefix=f"eos-streams-{name}-"))
        self.plan_path, self.crash_log = self.work / "crash-plan.json", self.work / "crash-log.jsonl"
        self.state_dir, self.stderr_log = self.work / "state", self.work / "stderr.log"
        self.password = None if args.no_ledger else pg_password(repo)
        self.table = f"harness.{name.replace('-', '_')}_ledger_{uniq.replace('-', '_').lower()}" if self.password else None
        self.admin = AdminClient({"bootstrap.servers": args.bootstrap})
        create_topics(self.admin, [self.topic_in, self.topic_out])
        self.pg = None
        if self.table:
            import psycopg
            self.pg = psycopg.connect(args.pg_dsn, password=self.password, autocommit=True, connect_timeout=10)
            # The local stack's run role owns the harness schema but may not create one: create it only if missing.
            if self.pg.execute("select 1 from pg_namespace where nspname = 'harness'").fetchone() is None:
                self.pg.execute("create schema harness")
            self.pg.execute(f"""create table {self.table} (id bigserial primary key, message_id text not null,
                           amount bigint not null, worker text not null, attempt integer not null,
                           applied_at timestamptz not null default clock_timestamp())""")

    def close(self) -> None:
        if not self.keep:
            delete_topics(self.admin, [self.topic_in, self.topic_out])
            delete_group(self.admin, self.app_id)
            if self.pg:
                self.pg.execute(f"drop table if exists {self.table}")
            for f in sorted(self.work.rglob("*"), reverse=True):
                f.unlink() if f.is_file() or f.is_symlink() else f.rmdir()
            self.work.rmdir()
        else:
            log(f"kept {self.work}, topics {self.topic_in} {self.topic_out}, table {self.table}")
        if self.pg:
            self.pg.close()


def print_checks(checks: list[tuple[str, bool]], label: str) -> int:
    """Print PASS/FAIL per check and the closing count line; return the number failed."""
    print()
    for name, good in checks:
        print(f"{'PASS' if good else 'FAIL'}  {name}")
    failed = sum(1 for _, g in checks if not g)
    print(f"{label}: {len(checks) - failed} passed, {failed} failed")
    return failed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", default="127.0.0.1:19092")
    ap.add_argument("--jdbc-url", default="jdbc:postgresql://127.0.0.1:15432/harness")
    ap.add_argument("--pg-dsn", default="postgresql://harness@127.0.0.1:15432/harness")
    ap.add_argument("--jar", default=str(HERE / "target" / "eos-streams.jar"))
    ap.add_argument("--count", type=int, default=50)
    ap.add_argument("--crashes", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--commit-interval-ms", type=int, default=100)
    ap.add_argument("--no-ledger", action="store_true", help="run without the Postgres ledger")
    ap.add_argument("--keep", action="store_true", help="keep topics, table and work folder")
    ap.add_argument("--timeout", type=float, default=240.0)
    args = ap.parse_args()

    ws = Workspace(args, "smoke")
    app_id, topic_in, topic_out, work = ws.app_id, ws.topic_in, ws.topic_out, ws.work
    plan_path, crash_log, state_dir, stderr_log = ws.plan_path, ws.crash_log, ws.state_dir, ws.stderr_log
    password, table, pg = ws.password, ws.table, ws.pg
    log(f"work folder {work}, app id {app_id}, ledger {table or 'off'}")

    ids = [f"pay-{i:04d}" for i in range(1, args.count + 1)]
    p = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 5, "log_level": 3})
    for seq, mid in enumerate(ids, 1):
        p.produce(topic_in, key=mid, value=json.dumps({"id": mid, "amount": 100 + seq, "seq": seq}))
    p.flush(30)
    crash_ids = sorted(random.Random(args.seed).sample(ids[1:], args.crashes))
    plan_path.write_text(json.dumps({"seed": args.seed, "crash_rate": None, "crash_ids": crash_ids}))
    log(f"produced {len(ids)} payments; crash plan {crash_ids}")

    watcher = CommittedWatcher(args.bootstrap, topic_out)
    watcher.start()

    env = dict(os.environ)
    env.pop("HARNESS_PG_PASSWORD", None)
    if password:
        env["HARNESS_PG_PASSWORD"] = password
    runs: list[Run] = []
    t0 = time.time()
    ok_exit = False
    attempt = 0
    while time.time() - t0 < args.timeout:
        cmd = ["java", "-jar", args.jar, "--bootstrap", args.bootstrap, "--input", topic_in, "--output", topic_out,
               "--application-id", app_id, "--state-dir", str(state_dir), "--crash-plan", str(plan_path),
               "--crash-log", str(crash_log), "--worker", "w0", "--attempt", str(attempt),
               "--commit-interval-ms", str(args.commit_interval_ms)]
        if table:
            cmd += ["--ledger-table", table, "--jdbc-url", args.jdbc_url, "--jdbc-user", "harness"]
        run = Run(cmd, env, attempt, stderr_log)
        runs.append(run)
        log(f"attempt {attempt}: started pid {run.proc.pid}")
        sent_term = False
        while True:
            rc = run.proc.poll()
            if rc is not None:
                break
            if not sent_term and len(watcher.seen) >= len(ids):
                log(f"attempt {attempt}: all {len(ids)} ids committed; SIGTERM")
                run.proc.send_signal(signal.SIGTERM)
                sent_term = True
            if time.time() - t0 > args.timeout:
                log("timeout: killing")
                run.proc.kill()
            time.sleep(0.02)
        run.t_exit = time.time()
        with open(stderr_log, "a") as f:
            f.write(f"{run.t_exit:.3f} attempt={attempt} (smoke) exit {rc}\n")
        log(f"attempt {attempt}: exit {rc} after {run.t_exit - run.t_spawn:.2f}s")
        if rc == 0 and sent_term:
            ok_exit = True
            break
        if rc != 137:
            log("unexpected exit; stderr tail:\n  " + "\n  ".join(run.lines[-15:]))
            if rc != 3:
                break
        attempt += 1

    time.sleep(0.5)
    watcher.stop.set()
    committed = read_all(args.bootstrap, topic_out, "read_committed")
    uncommitted = read_all(args.bootstrap, topic_out, "read_uncommitted")
    crashes = [json.loads(line) for line in crash_log.read_text().splitlines() if line.strip()] \
        if crash_log.exists() else []
    unacked_total = sum(len(c.get("unacked", [])) for c in crashes)
    ledger_rows = ledger_distinct = None
    if pg:
        ledger_rows, ledger_distinct = pg.execute(
            f"select count(*), count(distinct message_id) from {table}").fetchone()

    # --- timings -------------------------------------------------------------------------------
    print()
    print("attempt  exit  spawn->RUNNING  spawn->first-record  crash->exit  crash->next-first-record")
    for i, r in enumerate(runs):
        rc = r.proc.returncode
        run_s = f"{r.t_running - r.t_spawn:.2f}s" if r.t_running else "-"
        first = f"{r.first_record_time - r.t_spawn:.2f}s" if r.first_record_time else "-"
        lat = "-"
        mine = [c for c in crashes if c.get("attempt") == r.attempt]
        halt = f"{r.t_exit - mine[-1]['time']:.2f}s" if mine and r.t_exit else "-"
        if i > 0 and r.first_record_time:
            prev = [c for c in crashes if c.get("attempt") == runs[i - 1].attempt]
            if prev:
                lat = f"{r.first_record_time - prev[-1]['time']:.2f}s"
        print(f"{r.attempt:>7}  {rc:>4}  {run_s:>14}  {first:>19}  {halt:>11}  {lat:>24}")
    for c in crashes:
        print(f"crash: id={c['message_id']} offset={c['offset']} attempt={c['attempt']} "
              f"committed_offset={c.get('committed_offset')} unacked={len(c['unacked'])} {c['unacked']}")

    # --- checks --------------------------------------------------------------------------------
    keys = [k for k, _ in committed]
    checks = [
        ("clean SIGTERM exit 0", ok_exit),
        (f"read_committed records == {len(ids)} (got {len(committed)})", len(committed) == len(ids)),
        (f"read_committed distinct ids == {len(ids)} (got {len(set(keys))})", set(keys) == set(ids)),
        ("read_committed values carry id and amount",
         all(v.get("id") == k and isinstance(v.get("amount"), int) for k, v in committed)),
        (f"read_uncommitted records == {len(ids)} + unacked {unacked_total} (got {len(uncommitted)})",
         len(uncommitted) == len(ids) + unacked_total),
        (f"read_uncommitted > read_committed ({len(uncommitted)} > {len(committed)})",
         len(uncommitted) > len(committed)),
        (f"crash log lines == {len(crash_ids)} (got {len(crashes)})",
         sorted(c["message_id"] for c in crashes) == crash_ids),
        ("each crash's unacked contains its own id", all(c["message_id"] in c["unacked"] for c in crashes)),
    ]
    if pg:
        checks.append((f"ledger rows == {len(ids)} + unacked {unacked_total} (got {ledger_rows}, "
                       f"{ledger_distinct} distinct)",
                       ledger_rows == len(ids) + unacked_total and ledger_distinct == len(ids)))
    failed = print_checks(checks, "smoke")

    ws.close()
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
