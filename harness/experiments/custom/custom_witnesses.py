"""The witnesses of a custom run: per duplicated or lost id, who applied it, and the kill that explains it.

A foreign consumer keeps no crash records, so a witness is placed from what the
harness saw itself: each ledger row's insert time (`applied_at`) and, when the
consumer filled them, the row's own `worker` and `attempt` columns (the ledger's
truth, believed first); else the group's timeline (which member owned the id's
partition then, checker/group_timeline.py) or, for a consumer that assigns, the
slot's attempt running then, an attempt counting as alive until COMMIT_GRACE_S
after its kill (an insert sent just before a SIGKILL commits in the server
after it); and the kill log. A duplicate is explained by the kill of the attempt
that applied it first, before its last effect (the attempt died before
committing past it). Only when no kill can explain it does it say what can: the
same attempt applying it twice across a rebalance of the group (a transaction
aborted, or offsets lost, at the rebalance), the group change that moved its
partition to another attempt, or nothing ("unexplained"). A kill is credited
with every effect of its attempt that was applied again (by effect, not by the
first kill per id). A lost id is explained by the first kill of its partition's
owner after the group's commit passed its offset with no effect applied.
"""

from __future__ import annotations

from ...checker import group_timeline

MAX_WITNESSES = 20
COMMIT_GRACE_S = 0.25    # an insert sent before its writer's SIGKILL may commit this long after it


def attempt_at(starts: list[dict], worker: str | None, t: float) -> int | None:
    """The attempt of `worker` that was running at time t (the last one started before t)."""
    runs = [s for s in starts if s["worker"] == worker and s["t"] <= t]
    return max(runs, key=lambda s: s["t"])["attempt"] if runs else None


def slot_of(partition: int | None, slots: dict) -> str | None:
    return next((name for name, parts in slots.items() if partition in parts), None)


class Placer:
    """Who may have applied an effect at a time, from the group's timeline or the slots' starts."""

    def __init__(self, tl, ties, in_group: bool, starts: list[dict], slots: dict, ended: dict):
        self.tl, self.ties, self.in_group = tl, ties, in_group
        self.starts, self.slots, self.ended = starts, slots, ended

    def owners(self, partition, t: float, ended: dict | None = None) -> list:
        if self.in_group:
            graced = {k: v + COMMIT_GRACE_S for k, v in self.ended.items()}
            return group_timeline.owners_at(self.tl, self.ties, partition, t, graced if ended is None else ended)
        worker = slot_of(partition, self.slots)
        if not worker:
            return []
        now = attempt_at(self.starts, worker, t)
        before = attempt_at(self.starts, worker, t - COMMIT_GRACE_S)
        # the attempt killed just before t may have sent it: both are named
        if before != now and before is not None and self.ended.get((worker, before), float("inf")) <= t:
            return [(worker, before), (worker, now)]
        return [(worker, now)]

    def changes(self, since: float, until: float) -> int:
        """How many times the group's assignment changed between two times (0 for a consumer that assigns)."""
        if not self.in_group:
            return 0
        return sum(1 for t in rebalance_times(self.tl.samples) if since < t <= until)

    def loss_window(self, partition, offset) -> tuple[float | None, float | None]:
        """(the last sample whose commit had not passed the offset, the first whose commit had)."""
        before = None
        for s in self.tl.samples:
            c = (s.get("committed") or {}).get(partition)
            if c is None:
                continue
            if c > offset:
                return before, s["t"]
            before = s["t"]
        return before, None




def rebalance_times(samples: list[dict]) -> list[float]:
    """When the group's assignment (member -> partitions) differed from the last sample that listed it."""
    out, last = [], None
    for s in samples:
        members = s.get("members")
        if members is None:
            continue
        now = {m.get("member"): tuple(sorted(m.get("partitions") or [])) for m in members}
        if last is not None and now != last:
            out.append(s["t"])
        last = now
    return out


def _effect(t: float, owners: list, rel, from_ledger: bool) -> dict:
    if len(owners) == 1 and owners[0][0] is not None:
        return {"t": rel(t), "worker": owners[0][0], "attempt": owners[0][1],
                "by": "ledger" if from_ledger else "placed"}
    return {"t": rel(t), "worker": None, "attempt": None, "by": "placed",
            "owners": [f"{w} attempt {a}" if w else f"member {a}" for w, a in owners]}


def appliers(effects: list, part, placer: Placer) -> list[tuple[list, bool]]:
    """Per effect (t, worker, attempt) the attempts that may have applied it, and whether the ledger said so."""
    out = []
    for t, worker, attempt in effects:
        if worker is not None and attempt is not None:
            out.append(([(str(worker), int(attempt))], True))
        else:
            out.append((placer.owners(part, t), False))
    return out


def kill_credit(dup_effects: dict, kills: list[dict], placer: Placer, positions: dict) -> dict:
    """kill index -> how many effects of its attempt were applied again later (each such effect credits the
    kill of its attempt, whether or not an earlier kill explained the same id)."""
    index = {(k.get("worker"), k.get("attempt")): n for n, k in enumerate(kills)}
    credit: dict = {}
    for i, effects in dup_effects.items():
        effects = sorted(effects, key=lambda e: e[0])
        part = (positions.get(i) or (None, None))[0]
        for (t, *_), (owners, _) in zip(effects[:-1], appliers(effects[:-1], part, placer)):
            for o in owners:
                n = index.get(o)
                if n is not None and kills[n]["time"] < effects[-1][0]:
                    credit[n] = credit.get(n, 0) + 1
    return credit


def _explain(effects: list, placed: list, kills: list[dict], placer: Placer) -> tuple[list, str]:
    """The kills that explain a duplicate, and what explains it ('kill', or when no kill can: 'rebalance',
    'group change', 'unexplained')."""
    times = [e[0] for e in effects]
    first = {o for o in placed[0][0] if o[0] is not None}
    # the kill of the first effect's attempt, before its last effect (a kill up to COMMIT_GRACE_S before the
    # first effect is its writer's: the insert was sent before the kill)
    since = float("-inf") if placed[0][1] else times[0] - COMMIT_GRACE_S    # the ledger names its writer
    near = [k for k in kills if (k.get("worker"), k.get("attempt")) in first and since <= k["time"] <= times[-1]]
    if near:
        return near, "kill"
    last = {o for o in placed[-1][0] if o[0] is not None}
    if first and first == last and len(first) == 1 and placer.changes(times[0], times[-1]):
        return [], "rebalance"
    if placer.in_group and [o for o, _ in placed[:1]] != [o for o, _ in placed[-1:]]:
        return [], "group change"
    return [], "unexplained"


def witnesses(dup_effects: dict, lost_ids: list, kills: list[dict], placer: Placer, positions: dict,
              t0: float) -> tuple[list[dict], dict, dict, dict]:
    """Witness rows (taken in turn from each explaining kill, so every kill that caused a duplicate is shown),
    per kill index how many effects of its attempt were applied again and how many lost ids it explains,
    and how many duplicated ids each explanation accounts for. `dup_effects`: id -> [(insert time, worker,
    attempt)], worker and attempt None when the ledger row left them empty; [] when counted by --audit-sql."""
    def rel(t):
        return None if t is None else round(t - t0, 3)

    def kill_row(k):
        return {"worker": k.get("worker"), "attempt": k.get("attempt"), "pid": k.get("pid"), "t": rel(k["time"])}

    by_kill: dict = {}                    # index of the first explaining kill -> rows, in id order
    reasons: dict = {}
    for i in sorted(dup_effects):
        effects = sorted(dup_effects[i], key=lambda e: e[0])
        part = (positions.get(i) or (None, None))[0]
        placed = appliers(effects, part, placer)
        if effects:
            near, why = _explain(effects, placed, kills, placer)
        else:                              # effects counted by --audit-sql: no insert times to place them
            worker = slot_of(part, placer.slots)
            near, why = ([k for k in kills if k.get("worker") == worker] or kills)[:5], "unplaced"
        reasons[why] = reasons.get(why, 0) + 1
        key = kills.index(near[0]) if near and why == "kill" else None
        first = sorted(o for o in (placed[0][0] if placed else []) if o[0] is not None)
        row = {"id": i, "kind": "duplicated", "partition": part,
               "worker": first[0][0] if first else slot_of(part, placer.slots) if not effects else None,
               "effects": [_effect(e[0], o, rel, led) for e, (o, led) in zip(effects, placed)],
               "kills": [kill_row(k) for k in near], "explained_by": why}
        by_kill.setdefault(key, []).append(row)
    out: list = []
    room = MAX_WITNESSES - min(len(lost_ids), MAX_WITNESSES // 2)     # lost ids get their share of the rows
    queues = [by_kill[k] for k in sorted(by_kill, key=lambda k: (k is None, k or 0))]
    while queues and len(out) < room:
        for q in list(queues):
            if len(out) >= room:
                break
            out.append(q.pop(0))
            if not q:
                queues.remove(q)
    lost_explained: dict = {}
    for i in lost_ids:
        part, offset = positions.get(i) or (None, None)
        before, passed = placer.loss_window(part, offset) if part is not None else (None, None)
        # The owner that committed past it: the one around `before` (the sample that first shows the commit
        # may be the one its death woke, when it no longer owns anything), dead or alive.
        owners = set()
        for t in (before, passed):
            if t is not None and offset is not None:
                owners |= {o for o in placer.owners(part, t, ended={}) if o[0] is not None}
        window = [k for k in kills if (k.get("worker"), k.get("attempt")) in owners
                  and (before is None or k["time"] >= before)]
        near = ([k for k in window if passed is not None and k["time"] <= passed] or window)[:1]
        if near:
            lost_explained[kills.index(near[0])] = lost_explained.get(kills.index(near[0]), 0) + 1
        if len(out) < MAX_WITNESSES:
            out.append({"id": i, "kind": "lost", "partition": part, "offset": offset,
                        "worker": next(iter(sorted(owners)), (None, None))[0],
                        "committed_past_at": rel(passed), "effects": [],
                        "kills": [kill_row(k) for k in near], "explained_by": "kill" if near else "unexplained"})
    return out, kill_credit(dup_effects, kills, placer, positions), lost_explained, reasons
