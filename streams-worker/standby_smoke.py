#!/usr/bin/env python3
"""Restart latency of target/eos-streams.jar with a warm spare (--standby), against the local stack.

Does what the harness supervisor does with a warm spare per worker slot: it
starts instance 0 normally and a spare with the same command line plus
`--standby`; when the running instance halts at a planned crash (exit 137) it
at once writes the real command line of the next attempt (one JSON array) to
the spare's stdin and closes it, and starts the next spare (whose own command
line carries the running attempt's number, as the supervisor's does). With
`--mode cold` each restart is a fresh `java -jar` after the exit instead (the
behaviour before --standby), for comparison.

The input arrives in segments, one per crash: segment k ends with the k-th
planned crash id and is produced --dwell seconds after instance k printed its
FIRST-RECORD line, so every instance (and the spare starting next to it) gets
that long before its crash; --dwell 0 produces everything at once (the spare
then has only the new instance's start-up time to warm up, on the same CPUs).

Measured per crash: halt (the crash line's time) -> process exit, and
halt -> FIRST-RECORD time of the next instance. Checked as smoke.py does:

  * read_committed output: exactly the N input ids, once each;
  * read_uncommitted output: N + sum(len(unacked)) records;
  * crash log: K lines, the k-th written by attempt k (the real attempt, not the
    spare's provisional one); each FIRST-RECORD line and every output record
    carry an attempt that really ran;
  * with the ledger: N + sum(len(unacked)) rows;
  * every restart went through the spare;
  * a spare that is not needed exits 0 on EOF (another one gets an empty line),
    printing nothing but its STANDBY ready line.

    cd streams-worker && mvn -o -q package && python3 standby_smoke.py
    python3 standby_smoke.py --mode cold --jar /path/to/older/eos-streams.jar
"""

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from confluent_kafka import Producer

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from smoke import CommittedWatcher, Workspace, log, print_checks, read_all  # noqa: E402


# What the harness puts in front of `-jar` (harness/experiments/streams_jvm.py).
HARNESS_JVM = ["-XX:TieredStopAtLevel=1", "-XX:CompileThresholdScaling=5", "-XX:+UseSerialGC", "-Xmx512m",
               "-XX:-UsePerfData", "-Dharness.worker=true"]


class Proc:
    """One JVM; its stderr lines are timestamped, its exit time is taken by a thread blocked in wait()."""

    def __init__(self, cmd: list[str], env: dict, label: str, logfile: Path, standby: bool):
        self.label, self.cmd, self.standby = label, cmd, standby
        self.attempt: int | None = None          # the real attempt, once known
        self.t_spawn = time.time()
        self.proc = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE if standby else subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.t_activate = self.t_ready = self.t_running = self.first_record_time = self.t_exit = None
        self.first_record_attempt = None
        self.fed = False                         # the test produced this instance's input segment
        self.lines: list[str] = []
        self.exited = threading.Event()
        self.logfile = logfile
        threading.Thread(target=self._pump, daemon=True).start()
        threading.Thread(target=self._wait, daemon=True).start()

    def _wait(self) -> None:
        self.proc.wait()
        self.t_exit = time.time()
        self.exited.set()

    def _pump(self) -> None:
        with open(self.logfile, "a") as f:
            for line in self.proc.stderr:
                now = time.time()
                line = line.rstrip("\n")
                self.lines.append(line)
                f.write(f"{now:.3f} {self.label} {line}\n")
                f.flush()
                if line.startswith("eos-streams STANDBY ready") and self.t_ready is None:
                    self.t_ready = now
                elif line.startswith("eos-streams RUNNING") and self.t_running is None:
                    self.t_running = now
                elif line.startswith("eos-streams FIRST-RECORD"):
                    fields = dict(kv.split("=", 1) for kv in line.split()[2:] if "=" in kv)
                    self.first_record_attempt = int(fields["attempt"])
                    self.first_record_time = float(fields["time"])

    def activate(self, real_cmd: list[str], attempt: int) -> bool:
        """Hands the spare its real command line; False if it is gone already."""
        self.attempt = attempt
        try:
            self.proc.stdin.write(json.dumps(real_cmd) + "\n")
            self.proc.stdin.close()
        except OSError:
            return False
        self.t_activate = time.time()
        return True

    def dismiss(self, empty_line: bool = False) -> None:
        try:
            if empty_line:
                self.proc.stdin.write("\n")
            self.proc.stdin.close()
        except OSError:
            pass


def segments(ids: list[str], crash_ids: list[str]) -> list[list[str]]:
    """ids cut right after each crash id: segment k ends with crash_ids[k]; the rest is the last segment."""
    out, cur = [], []
    for mid in ids:
        cur.append(mid)
        if mid in crash_ids:
            out.append(cur)
            cur = []
    out.append(cur)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["standby", "cold"], default="standby")
    ap.add_argument("--bootstrap", default="127.0.0.1:19092")
    ap.add_argument("--jdbc-url", default="jdbc:postgresql://127.0.0.1:15432/harness")
    ap.add_argument("--pg-dsn", default="postgresql://harness@127.0.0.1:15432/harness")
    ap.add_argument("--jar", default=str(HERE / "target" / "eos-streams.jar"))
    ap.add_argument("--jvm", default=" ".join(HARNESS_JVM), help="JVM options before -jar (default: the harness's)")
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--crashes", type=int, default=8)
    ap.add_argument("--dwell", type=float, default=3.0,
                    help="seconds between an instance's first record and the input of its crash (0: all input at once)")
    ap.add_argument("--next-spare", choices=["handoff", "running"], default="handoff",
                    help="start the next spare at the handoff (as the supervisor does) or once the new "
                         "instance printed RUNNING")
    ap.add_argument("--spare-delay", type=float, default=0.0,
                    help="with --next-spare handoff: start the next spare this long after the handoff")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--commit-interval-ms", type=int, default=100)
    ap.add_argument("--no-ledger", action="store_true", help="run without the Postgres ledger")
    ap.add_argument("--keep", action="store_true", help="keep topics, table and work folder")
    ap.add_argument("--timeout", type=float, default=300.0)
    args = ap.parse_args()
    standby = args.mode == "standby"

    ws = Workspace(args, "standby-smoke")
    app_id, topic_in, topic_out, work = ws.app_id, ws.topic_in, ws.topic_out, ws.work
    plan_path, crash_log, state_dir, stderr_log = ws.plan_path, ws.crash_log, ws.state_dir, ws.stderr_log
    password, table, pg = ws.password, ws.table, ws.pg
    log(f"mode {args.mode}, work folder {work}, app id {app_id}, ledger {table or 'off'}")

    ids = [f"pay-{i:04d}" for i in range(1, args.count + 1)]
    crash_ids = sorted(random.Random(args.seed).sample(ids[1:], args.crashes))
    plan_path.write_text(json.dumps({"seed": args.seed, "crash_rate": None, "crash_ids": crash_ids}))
    segs = segments(ids, crash_ids)
    producer = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 5, "log_level": 3})
    seq = {mid: i for i, mid in enumerate(ids, 1)}

    def produce(k: int) -> None:
        for mid in segs[k]:
            producer.produce(topic_in, key=mid, value=json.dumps({"id": mid, "amount": 100 + seq[mid], "seq": seq[mid]}))
        producer.flush(30)

    log(f"{len(ids)} payments in {len(segs)} segments; crash plan {crash_ids}")
    produced = 0
    if args.dwell <= 0:
        for k in range(len(segs)):
            produce(k)
        produced = len(segs)
    else:
        produce(0)
        produced = 1

    watcher = CommittedWatcher(args.bootstrap, topic_out)
    watcher.start()
    env = dict(os.environ)
    env.pop("HARNESS_PG_PASSWORD", None)
    if password:
        env["HARNESS_PG_PASSWORD"] = password

    def command(attempt: int) -> list[str]:
        cmd = ["java", *args.jvm.split(), "-jar", str(Path(args.jar).resolve()), "--bootstrap", args.bootstrap,
               "--input", topic_in, "--output", topic_out, "--application-id", app_id,
               "--state-dir", str(state_dir), "--crash-plan", str(plan_path), "--crash-log", str(crash_log),
               "--worker", "w0", "--attempt", str(attempt), "--commit-interval-ms", str(args.commit_interval_ms)]
        if table:
            cmd += ["--ledger-table", table, "--jdbc-url", args.jdbc_url, "--jdbc-user", "harness"]
        return cmd

    def start(attempt: int) -> Proc:
        p = Proc(command(attempt), env, f"attempt={attempt}", stderr_log, standby=False)
        p.attempt = attempt
        return p

    spare_no = 0

    def start_spare(provisional: int) -> Proc:
        nonlocal spare_no
        spare_no += 1
        return Proc(command(provisional) + ["--standby"], env, f"spare{spare_no}", stderr_log, standby=True)

    instances: list[Proc] = []
    spares: list[Proc] = []          # every spare ever started
    t0 = time.time()
    ok_exit = False
    attempt = 0
    cur = start(attempt)
    instances.append(cur)
    spare = start_spare(attempt) if standby else None
    if spare:
        spares.append(spare)
    log(f"attempt 0: started pid {cur.proc.pid}" + (f", spare pid {spare.proc.pid}" if spare else ""))
    sent_term = False
    spare_due = None                 # when the next spare is to start (spare is None meanwhile)
    while time.time() - t0 < args.timeout:
        if not cur.exited.wait(0.01):
            if spare_due is not None and (cur.t_running if args.next_spare == "running" else time.time() >= spare_due):
                spare = start_spare(attempt)
                spares.append(spare)
                spare_due = None
            if (produced < len(segs) and not cur.fed and cur.first_record_time
                    and time.time() >= cur.first_record_time + args.dwell):
                produce(produced)      # the next crash's segment: one per instance
                produced += 1
                cur.fed = True
            if not sent_term and len(watcher.seen) >= len(ids):
                log(f"attempt {attempt}: all {len(ids)} ids committed; SIGTERM")
                cur.proc.send_signal(signal.SIGTERM)
                sent_term = True
            continue
        rc = cur.proc.returncode
        if rc == 0 and sent_term:
            ok_exit = True
            log(f"attempt {attempt}: exit 0")
            break
        if rc not in (137, 3):
            log(f"attempt {attempt}: unexpected exit {rc}; stderr tail:\n  " + "\n  ".join(cur.lines[-15:]))
            break
        attempt += 1
        nxt = None
        if standby and spare is None:
            # The next spare was not started yet: as the supervisor does, start one and hand it the line at once.
            spare = start_spare(attempt - 1)
            spares.append(spare)
            spare_due = None
        if spare is not None:
            if spare.activate(command(attempt), attempt):
                nxt = spare
            else:
                log(f"spare pid {spare.proc.pid} is gone (exit {spare.proc.poll()}); cold start")
        if nxt is None:
            nxt = start(attempt)
        cur = nxt
        instances.append(cur)
        spare = None
        if standby:
            # As the supervisor does: the next spare starts now, its command line carrying the running attempt.
            if args.next_spare == "handoff" and args.spare_delay <= 0:
                spare = start_spare(attempt)
                spares.append(spare)
            else:
                spare_due = time.time() + args.spare_delay
        log(f"attempt {attempt - 1}: exit {rc}; attempt {attempt}: pid {cur.proc.pid}"
            + (" (was the spare)" if cur.standby else ""))
    else:
        log("timeout: killing")
        cur.proc.kill()

    # The spare left over is not needed: EOF. One more gets an empty line. Both must exit 0 quietly.
    dismissed = []
    if standby and spare is None:
        spare = start_spare(attempt)
        spares.append(spare)
    if spare is not None:
        extra = start_spare(attempt)
        spares.append(extra)
        time.sleep(1.0)
        spare.dismiss()
        extra.dismiss(empty_line=True)
        dismissed = [spare, extra]
        for p in dismissed:
            p.exited.wait(30)
    time.sleep(0.5)
    watcher.stop.set()
    cur.exited.wait(15)

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
    print("attempt  exit  how    spare-age  halt->exit  exit->handoff  handoff->RUNNING  halt->next-first-record")
    by_attempt = {c["attempt"]: c for c in crashes}
    halt_exit, restart = [], []
    for i, r in enumerate(instances):
        rc = r.proc.returncode
        how = "spare" if r.standby else "cold"
        start_t = r.t_activate if r.standby else r.t_spawn
        age = f"{r.t_activate - r.t_spawn:.2f}s" if r.standby else "-"
        c = by_attempt.get(r.attempt)
        he = (r.t_exit - c["time"]) if c and r.t_exit else None
        prev = by_attempt.get(r.attempt - 1) if i > 0 else None
        lat = (r.first_record_time - prev["time"]) if prev and r.first_record_time else None
        prev_exit = instances[i - 1].t_exit if i > 0 else None
        ho = (start_t - prev_exit) if prev_exit and start_t else None
        run = (r.t_running - start_t) if r.t_running and start_t else None
        if he is not None:
            halt_exit.append(he)
        if lat is not None:
            restart.append(lat)
        fmt = lambda v: f"{v:.3f}s" if v is not None else "-"  # noqa: E731
        print(f"{r.attempt:>7}  {rc if rc is not None else '-':>4}  {how:<5}  {age:>9}  {fmt(he):>10}  {fmt(ho):>13}"
              f"  {fmt(run):>16}  {fmt(lat):>23}")
    for label, xs in (("halt -> exit", halt_exit), ("halt -> next first record", restart)):
        if xs:
            print(f"{label}: n={len(xs)} median {statistics.median(xs):.3f}s  min {min(xs):.3f}s  max {max(xs):.3f}s")
    ready = [s.t_ready - s.t_spawn for s in spares if s.t_ready]
    if ready:
        print(f"spare spawn -> STANDBY ready: n={len(ready)} median {statistics.median(ready):.2f}s  max {max(ready):.2f}s")
    for c in crashes:
        print(f"crash: id={c['message_id']} offset={c['offset']} attempt={c['attempt']} "
              f"committed_offset={c.get('committed_offset')} unacked={len(c['unacked'])}")

    # --- checks --------------------------------------------------------------------------------
    keys = [k for k, _ in committed]
    ran = {r.attempt for r in instances if r.first_record_time}
    out_attempts = {v.get("attempt") for _, v in committed} | {v.get("attempt") for _, v in uncommitted}
    checks = [
        ("clean SIGTERM exit 0", ok_exit),
        (f"read_committed records == {len(ids)} (got {len(committed)})", len(committed) == len(ids)),
        (f"read_committed distinct ids == {len(ids)} (got {len(set(keys))})", set(keys) == set(ids)),
        ("read_committed values carry id and amount",
         all(v.get("id") == k and isinstance(v.get("amount"), int) for k, v in committed)),
        (f"read_uncommitted records == {len(ids)} + unacked {unacked_total} (got {len(uncommitted)})",
         len(uncommitted) == len(ids) + unacked_total),
        (f"crash log lines == {len(crash_ids)} (got {len(crashes)})",
         sorted(c["message_id"] for c in crashes) == crash_ids),
        ("crash k written by attempt k", [c["attempt"] for c in crashes] == list(range(len(crashes)))),
        ("each crash's unacked contains its own id", all(c["message_id"] in c["unacked"] for c in crashes)),
        ("FIRST-RECORD attempt == the real attempt",
         all(r.first_record_attempt == r.attempt for r in instances if r.first_record_time)),
        (f"output attempts {sorted(a for a in out_attempts if a is not None)} all ran", out_attempts <= ran),
    ]
    if standby:
        checks.append((f"restarts through the spare: {sum(r.standby for r in instances)} of {len(instances) - 1}",
                       all(r.standby for r in instances[1:])))
        checks.append(("unneeded spares exit 0 (EOF, empty line), printing nothing but STANDBY ready",
                       len(dismissed) == 2 and all(
                           p.proc.returncode == 0 and all(x.startswith("eos-streams STANDBY ready") for x in p.lines)
                           for p in dismissed)))
    if pg:
        checks.append((f"ledger rows == {len(ids)} + unacked {unacked_total} (got {ledger_rows}, "
                       f"{ledger_distinct} distinct)",
                       ledger_rows == len(ids) + unacked_total and ledger_distinct == len(ids)))
    failed = print_checks(checks, f"standby smoke ({args.mode})")

    for p in instances + spares:
        if p.proc.poll() is None:
            p.proc.kill()
            p.proc.wait()
    ws.close()
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
