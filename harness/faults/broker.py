"""broker-kill, broker-pause, leader-kill: faults of the Kafka cluster itself, not of the consumer.

Kafka's own system tests hard-bounce brokers under transactional clients, and
Jepsen's nemeses kill and pause nodes; these three do the same on the
3-broker cluster (`harness up --brokers 3`, or the compose cluster), on a
seeded schedule, one node at a time (min.insync.replicas=2 of 3 replicas
keeps acks=all writable with one node out, never with two):

- broker-kill: SIGKILL a seeded node, start it again after a seeded delay;
- broker-pause: SIGSTOP a seeded node (a GC pause, a frozen VM), SIGCONT it after a seeded delay;
- leader-kill: SIGKILL the node that leads what the experiment depends on
  (its declaration's `leader`: the input or output partition, or the
  transaction coordinator of a transactional worker), then start it again.

The schedule starts with the workers' first record: `count` faults, each
`every` seconds (seeded, 0.5x to 1.5x) after the previous node answers again,
each keeping its node out for `down` seconds (seeded, 0.5x to 1x). A node is
"back" when it runs and accepts connections again; the run does not end while
a node is out. Each fault is one entry of the report's `faults` with its
target, times, and the transactions workers saw aborted meanwhile; whatever
the run's end, every node is running again when the supervisor stops (`finish`).
"""

from __future__ import annotations

import random
import time

from ..core.errors import first_line
from ..runtime.client_faults import PLANNED_ABORT
from .base import Fault, number

# A restarted JVM on two busy cores answers within seconds; past this the fault stops waiting and says so,
# unless the node is visibly still at work: its log grew within the last LOG_QUIET_S (a loaded machine once
# took 74 s to bring a killed broker container back, and another one past 120 s while its log showed it
# rejoining the quorum). Past RECOVERY_CAP_S it stops waiting whatever the log does.
RECOVERY_TIMEOUT_S = 120
LOG_QUIET_S = 30.0
RECOVERY_CAP_S = 480
LOG_LOOK_EVERY_S = 5.0
# A restarted node whose process (or container) is gone this long has ended: no need to wait out the bound.
GONE_GRACE_S = 3.0
CHECK_EVERY_S = 0.25
MAX_COUNT = 100


class BrokerFault(Fault):
    name = "broker-fault"
    moves_partitions = True     # a node that stops answering hands its partitions' leadership to another
    action = "SIGKILL"          # or SIGSTOP
    verb = "killed"
    options = {"count": "how many faults, one node at a time (default 2)",
               "every": "seconds between a node answering again and the next fault, seeded 0.5x-1.5x (default 2)",
               "down": "seconds a node stays out before it is restarted or resumed, seeded 0.5x-1x (default 3)"}

    def __init__(self, count: int = 2, every: float = 2.0, down: float = 3.0, seed: int = 25):
        self.count, self.every, self.down, self.seed = count, every, down, seed
        rng = random.Random(f"{seed}-{self.name}")
        self.waits = [round(every * rng.uniform(0.5, 1.5), 3) for _ in range(count)]
        self.downs = [round(down * rng.uniform(0.5, 1.0), 3) for _ in range(count)]
        self.picks = [rng.random() for _ in range(count)]      # which node, for faults that choose one
        self.hands = None
        self.run = None
        self.state = "wait"
        self.i = 0
        self.next_at = self.up_at = self.checked = 0.0
        self.struck: list[dict] = []
        self.skipped: list[str] = []
        self.broken: str | None = None      # why the run cannot go on: a node that did not come back

    @classmethod
    def from_options(cls, spec: str, opts: dict, params) -> "BrokerFault":
        count = number(spec, "count", opts.pop("count"), int, 1, MAX_COUNT) if "count" in opts else 2
        every = number(spec, "every", opts.pop("every"), float, 0.0, 3600) if "every" in opts else 2.0
        down = number(spec, "down", opts.pop("down"), float, 0.0, 600) if "down" in opts else 3.0
        return cls(count, every, down, params.seed)

    def describe(self) -> dict:
        return {"fault": self.name, "count": self.count, "every": self.every, "down": self.down}

    def check_stack(self, stack, docker_client=None) -> None:
        from ..stack.brokers import for_stack
        self.hands = for_stack(stack, self.name, docker_client)

    def setup(self, run) -> None:
        self.run = run

    # -- what each fault does ------------------------------------------------------------
    def choose(self, sup) -> tuple[int | None, str]:
        """The node to strike now, and what it is (None: no target, with the reason)."""
        ids = self.hands.node_ids()
        node = ids[int(self.picks[self.i] * len(ids))]
        return node, "seeded choice"

    def strike(self, node: int) -> str | None:
        return self.hands.kill(node)

    def recover(self, node: int) -> str | None:
        return self.hands.start(node)

    def may_recover(self, now: float) -> bool:
        """The struck node may be brought back now (its planned time out is over)."""
        return now >= self.up_at

    def back(self, node: int) -> bool:
        """The node is back: it answers again (a rolling upgrade also waits for every replica in sync)."""
        return self.hands.answers(node)

    # -- the schedule ---------------------------------------------------------------------
    def busy(self) -> bool:
        return self.state in ("out", "recovering")

    def tick(self, sup) -> None:
        now = time.time()
        if self.state == "wait":
            firsts = [s.first_message_at for s in sup.slots if s.first_message_at]
            if firsts:
                self.state, self.next_at = "idle", min(firsts) + self.waits[0]
            elif all(s.finished for s in sup.slots):
                self.state = "done"
        elif self.state == "idle":
            if all(s.finished for s in sup.slots):
                self.state = "done"             # the workers finished first: the remaining faults are missed
            elif now >= self.next_at:
                self._strike(sup, now)
        elif self.state == "out" and self.may_recover(now):
            cur = self.struck[-1]
            try:
                cur["recovered"] = self.recover(cur["node"])
            except Exception as e:  # noqa: BLE001 - the run stops and reports it; `harness up` restarts the node
                cur["note"] = f"could not be {self._recovered_word()}: {first_line(e)}"
                cur["back_at"] = None
                self.broken = f"{self.name}: {self.hands.target(cur['node'])} (node {cur['node']}) {cur['note']}"
                self.state = "done"
                return
            cur["recovered_at"] = round(time.time(), 3)
            self.state = "recovering"
        elif self.state == "recovering" and now - self.checked >= CHECK_EVERY_S:
            self.checked = now
            cur = self.struck[-1]
            if self.back(cur["node"]):
                cur["back_at"] = round(now, 3)
                self._next(now)
                return
            if self.hands.running(cur["node"]):
                cur.pop("gone_since", None)
            else:
                cur.setdefault("gone_since", now)
            waited, at_work = now - cur["recovered_at"], self._still_at_work(cur, now)
            if now - cur.get("gone_since", now) > GONE_GRACE_S or waited > RECOVERY_CAP_S or \
                    (waited > RECOVERY_TIMEOUT_S and not at_work):
                self._give_up(cur, now)

    def _still_at_work(self, cur: dict, now: float) -> bool:
        """Did the node's log change within the last LOG_QUIET_S? Looked at every LOG_LOOK_EVERY_S from
        LOG_QUIET_S before the bound (its sizes on the local stack, its last lines on compose)."""
        if now - cur["recovered_at"] < RECOVERY_TIMEOUT_S - LOG_QUIET_S:
            return True
        if now - cur.get("log_looked_at", 0.0) >= LOG_LOOK_EVERY_S:
            cur["log_looked_at"] = now
            look = getattr(self.hands, "activity", None)
            seen = look(cur["node"]) if look else self.hands.log_tail(cur["node"], 3)
            if "log_seen" in cur and seen != cur["log_seen"]:
                cur["log_changed_at"] = now
            cur["log_seen"] = seen
        return now - cur.get("log_changed_at", cur["recovered_at"]) <= LOG_QUIET_S

    def _give_up(self, cur: dict, now: float) -> None:
        """The node did not come back (its process or container ended, or it never answered): say what it is
        doing and what its log says, and stop the run (`stops_run`) instead of letting it wait out its time
        limit on a cluster short of a node."""
        node = f"{self.hands.target(cur['node'])} (node {cur['node']})"
        waited = now - cur["recovered_at"]
        tail = " | ".join(l.strip() for l in self.hands.log_tail(cur["node"], 3).splitlines() if l.strip())
        cur["back_at"] = None
        cur["note"] = (f"did not come back {waited:.0f} s after it was {self._recovered_word()}: "
                       f"{self.hands.condition(cur['node'])}" + (f"; its log ends: {tail}" if tail else ""))
        cur.pop("gone_since", None)
        self.broken = f"{self.name}: {node} {cur['note']}"
        self.state = "done"

    def stops_run(self) -> str | None:
        return self.broken

    def _strike(self, sup, now: float) -> None:
        node, what = self.choose(sup)
        if node is None:
            self.skipped.append(what)
            self._next(now)
            return
        why = f"node {node} was not running"
        try:
            handle = self.strike(node)
        except Exception as e:  # noqa: BLE001 - e.g. a container that cannot be found: said in the report
            handle, why = None, f"node {node}: {first_line(e)}"
        if handle is None:
            self.skipped.append(why)
            self._next(now)
            return
        self.struck.append({"node": node, "what": what, "time": round(now, 3), "process": handle,
                            "down_planned": self.downs[self.i]})
        self.up_at = now + self.downs[self.i]
        self.state = "out"

    def _next(self, now: float) -> None:
        self.i += 1
        if self.i >= self.count:
            self.state = "done"
        else:
            self.state, self.next_at = "idle", now + self.waits[self.i]

    def _recovered_word(self) -> str:
        return "restarted"

    def finish(self, sup) -> None:
        """The run is over (finished, timed out or interrupted): no node stays killed or frozen."""
        if self.state == "out":
            cur = self.struck[-1]
            try:
                cur["recovered"] = self.recover(cur["node"])
                cur["recovered_at"] = round(time.time(), 3)
            except Exception as e:  # noqa: BLE001 - say it, and let `harness up` start the node
                cur["note"] = f"could not be {self._recovered_word()} at the end of the run: {e}"
            cur.setdefault("back_at", None)
        self.state = "done" if self.state != "wait" else self.state

    # -- what the report says ---------------------------------------------------------------
    def entries(self, crashes, events) -> list[dict]:
        out = []
        for k, f in enumerate(self.struck):
            end = self.struck[k + 1]["time"] if k + 1 < len(self.struck) else float("inf")
            aborts = [e for e in events if e.get("event") in ("txn_aborted", "fenced") and e.get("reason") != PLANNED_ABORT
                      and f["time"] <= e.get("t", 0) < end]         # the abort fault's own aborts are not the broker's
            # a stuck call is reported when its deadline passes: place it by when the call began
            stuck = [e for e in events if e.get("event") == "txn_stuck" and e.get("outcome") != "aborted"
                     and f["time"] <= e.get("since", e.get("t", 0)) < end]
            rec, back = f.get("recovered_at"), f.get("back_at")
            out.append({"fault": self.name, "time": f["time"],
                        "target": f"{self.hands.target(f['node'])} (node {f['node']}, {f['what']})",
                        "node": f["node"], "signal": self.action, "process": f["process"],
                        "recovered_at": rec, "back_at": back,
                        "out_seconds": round(rec - f["time"], 3) if rec else None,
                        "until_answering_seconds": round(back - f["time"], 3) if back else None,
                        "aborted_transactions": len(aborts),
                        "aborted_records_at_most": sum(len(e.get("produced") or []) for e in aborts + stuck),
                        "unknown_outcome_transactions": len(stuck),
                        **({"note": f["note"]} if f.get("note") else {})})
        return out

    def story(self, events) -> dict:
        return {"planned": self.count, "struck": len(self.struck), "skipped": list(self.skipped),
                "kind": getattr(self.hands, "kind", None)}

    def bounds_aborts(self, story: dict | None) -> bool:
        return bool(story and story.get("struck"))

    def sentence(self, story: dict | None) -> str:
        if not self.struck:
            return ""
        parts = []
        for f in self.struck:
            rec, back = f.get("recovered_at"), f.get("back_at")
            parts.append(f"node {f['node']} {self.verb} for {rec - f['time']:.1f} s" if rec else
                         f"node {f['node']} {self.verb}")
            if back:
                parts[-1] += f", answering {back - f['time']:.1f} s after the fault"
        return f" {self.name}: " + "; ".join(parts) + "."

    def shortfall(self, crashes, story: dict | None) -> str:
        if story and story["struck"] < story["planned"]:
            why = "; ".join(story["skipped"]) or self.missed_because()
            return f" Only {story['struck']} of {story['planned']} {self.name} faults struck ({why})."
        return ""


class BrokerKill(BrokerFault):
    name = "broker-kill"


class BrokerPause(BrokerFault):
    name = "broker-pause"
    action = "SIGSTOP"
    verb = "frozen"

    def strike(self, node: int) -> str | None:
        return self.hands.pause(node)

    def recover(self, node: int) -> str | None:
        self.hands.resume(node)
        return "resumed"

    def _recovered_word(self) -> str:
        return "resumed"


class LeaderKill(BrokerFault):
    name = "leader-kill"
    options = {**BrokerFault.options,
               "of": "input, output or coordinator (default: what the experiment depends on, its declaration's "
                     "`leader`)"}

    def __init__(self, count: int = 2, every: float = 2.0, down: float = 3.0, seed: int = 25, of: str | None = None):
        super().__init__(count, every, down, seed)
        self.of = of

    @classmethod
    def from_options(cls, spec: str, opts: dict, params) -> "LeaderKill":
        of = opts.pop("of", None)
        f = super().from_options(spec, opts, params)
        if of is not None and of not in ("input", "output", "coordinator"):
            from ..core.errors import HarnessError
            raise HarnessError(f"--fault {spec}: of must be input, output or coordinator, got {of!r}")
        f.of = of
        return f

    def describe(self) -> dict:
        return {**super().describe(), "of": self.of}

    def unmet(self, exp) -> str | None:
        of = self.of or exp.leader
        if of == "output" and not exp.stores.output:
            return "an output topic"
        if of == "coordinator" and exp.leader != "coordinator":
            return "a transactional Python worker (a transaction coordinator to kill)"
        return None

    def setup(self, run) -> None:
        super().setup(run)
        self.of = self.of or run.exp.leader

    def choose(self, sup) -> tuple[int | None, str]:
        from ..experiments.launch import transactional_id_of
        from ..stack.brokers import leader_of
        run = self.run
        partitions = run.params.partitions
        partition = int(self.picks[self.i] * partitions)
        slot = partition % max(1, run.params.workers)
        bootstrap = run.stack.bootstrap_servers
        if self.of == "coordinator":
            attempt = sup.slots[slot].attempt if slot < len(sup.slots) else 1
            return leader_of(bootstrap, None, transactional_id=transactional_id_of(run, slot, attempt))
        topic = run.names.output_topic if self.of == "output" else run.names.input_topic
        return leader_of(bootstrap, topic, partition)
