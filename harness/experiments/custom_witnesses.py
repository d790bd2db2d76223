"""The witnesses of a custom run: per duplicated or lost id, who applied it, and the kill that explains it.

A foreign consumer keeps no crash records, so a witness is placed from what the
harness saw itself: each ledger row's insert time (`applied_at`), the group's
timeline (which member owned the id's partition then, checker/group_timeline.py)
or, for a consumer that assigns, the slot's attempt running then, and the kill
log. A duplicate is explained by a kill of the attempt that applied it first,
between its first and its last effect (the attempt died before committing past
it); without such a kill, by the group change that moved its partition, when
one did. A lost id is explained by the first kill of its partition's owner
after the group's commit passed its offset with no effect applied.
"""

from __future__ import annotations

from ..checker import group_timeline

MAX_WITNESSES = 20


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
            return group_timeline.owners_at(self.tl, self.ties, partition, t,
                                            self.ended if ended is None else ended)
        worker = slot_of(partition, self.slots)
        return [(worker, attempt_at(self.starts, worker, t))] if worker else []

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


def _effect(t: float, owners: list, rel) -> dict:
    if len(owners) == 1 and owners[0][0] is not None:
        return {"t": rel(t), "worker": owners[0][0], "attempt": owners[0][1]}
    return {"t": rel(t), "worker": None, "attempt": None,
            "owners": [f"{w} attempt {a}" if w else f"member {a}" for w, a in owners]}


def witnesses(dup_times: dict, lost_ids: list, kills: list[dict], placer: Placer, positions: dict,
              t0: float) -> tuple[list[dict], dict, dict]:
    """Witness rows (taken in turn from each explaining kill, so every kill that caused a duplicate is shown),
    and per kill index how many duplicated and how many lost ids it explains."""
    def rel(t):
        return None if t is None else round(t - t0, 3)

    def kill_row(k):
        return {"worker": k.get("worker"), "attempt": k.get("attempt"), "pid": k.get("pid"), "t": rel(k["time"])}

    by_kill: dict = {}                    # index of the first explaining kill -> rows, in id order
    dup_explained: dict = {}
    for i in sorted(dup_times):
        times = sorted(dup_times[i])
        part = (positions.get(i) or (None, None))[0]
        placed = [placer.owners(part, t) for t in times]
        first = {o for o in (placed[0] if placed else []) if o[0] is not None}
        near = [k for k in kills if times and times[0] <= k["time"] <= times[-1]
                and (k.get("worker"), k.get("attempt")) in first]
        if near:
            why = "kill"
        elif len(times) >= 2 and placed[0] != placed[-1] and placer.in_group:
            why = "group change"
        else:
            why = "unexplained" if times else "unplaced"
        if not times:                      # effects counted by --audit-sql: no insert times to place them
            worker = slot_of(part, placer.slots)
            near = ([k for k in kills if k.get("worker") == worker] or kills)[:5]
        key = kills.index(near[0]) if near and why == "kill" else None
        if key is not None:
            dup_explained[key] = dup_explained.get(key, 0) + 1
        row = {"id": i, "kind": "duplicated", "partition": part,
               "worker": next(iter(sorted(first)), (None, None))[0],
               "effects": [_effect(t, o, rel) for t, o in zip(times, placed)],
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
    for n, i in enumerate(lost_ids):
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
    return out, dup_explained, lost_explained
