"""Who owned what, and when: a consumer group's own timeline, read back to judge kills and name witnesses.

A consumer the harness did not write may subscribe through the group instead
of taking the partitions it is given (HARNESS_PARTITIONS): then only the group
knows which process owns which partition. The run samples it (the admin API's
describe-consumer-groups and the committed offsets, runtime/group_sampler.py)
and the ledger's new rows, a few times a second; this module reads those
samples, with the harness's own records of starts and kills, and answers:

- which worker attempt a member is (`MemberTies`: the member's client.id when
  the consumer used HARNESS_CLIENT_ID, else the only attempt that started
  and lives when a new member first appears; otherwise it stays unidentified);
- whether an attempt owns partitions and has done work since it started (a
  committed offset of an owned partition grew, or an effect on it appeared,
  both after the sample that first showed it owning it): only then may a
  random kill strike it, and a kill is counted by what its victim could damage;
- how long the group stalled after a kill (until every partition the victim
  owned, and had not finished, commits again, whoever owns it by then);
- which member applied each effect of a duplicated id, and which kill explains
  it (or the group change that does, when no kill does), and for a lost id the
  kill after the commit that passed it.

Consumers that assign() their partitions do not join the group (it has no
members): for them HARNESS_PARTITIONS is the truth. Everything here is pure,
so it is tested on hand-made samples; a sample is a dict with `t`, `members`
([{member, client, partitions}]), `committed` ({partition: offset}) and
`effects` ({partition: latest effect time}), any of them None when unread.
"""

from __future__ import annotations

import bisect

CLIENT_ID_SEPARATOR = "."

# What a kill could do, judged from the last sample before it.
DAMAGE = "could do damage"            # owned partitions, had worked since its start, had work left
DONE = "after its last commit"        # its partitions were all committed to their end
IDLE = "before joining"               # owned nothing, or had done nothing since it started
KILL_STATES = (DAMAGE, DONE, IDLE)
# A sample this soon after a kill (the sampler is woken by the death) shows where the victim's commits stood.
BASELINE_WINDOW_S = 0.1


def client_id(run_id: str, worker: str, attempt: int) -> str:
    """The client.id a consumer is asked to use (HARNESS_CLIENT_ID), naming its run, slot and attempt."""
    return CLIENT_ID_SEPARATOR.join((run_id, worker, str(attempt)))


def parse_client_id(text, run_id: str) -> tuple[str, int] | None:
    parts = str(text or "").rsplit(CLIENT_ID_SEPARATOR, 2)     # run ids hold a dot themselves
    if len(parts) != 3 or parts[0] != run_id or not parts[2].isdigit():
        return None
    return parts[1], int(parts[2])


def normalize(sample: dict) -> dict:
    """A sample read back from JSON: integer partitions again."""
    def ints(d):
        return None if d is None else {int(k): v for k, v in d.items()}
    return {**sample, "committed": ints(sample.get("committed")), "effects": ints(sample.get("effects"))}


# The states of a group with no member: what consumers that assign() leave (EMPTY once they commit) or no
# group yet (DEAD). Any other state (STABLE, PREPARING_REBALANCING, ASSIGNING, ...) means members joined.
MEMBERLESS = ("EMPTY", "DEAD", "UNKNOWN", None)
# A group not described in this many samples is taken as never described (a group that does not exist yet
# is refused as not found at first: a subscriber may not have joined).
UNDESCRIBED_SAMPLES = 10


def group_mode(samples: list[dict]) -> bool | None:
    """Did the consumers join the group? True once a sample showed a member or a membered state; False once
    the group was seen EMPTY (offsets committed, nobody joined) with no member ever, or when the broker did not
    describe the group in UNDESCRIBED_SAMPLES samples (then HARNESS_PARTITIONS is all there is); None while undecided (no group yet: a
    subscriber may still be joining, and nobody's work can be placed)."""
    described = False
    empty = False
    for s in samples:
        if s.get("members") or s.get("state") not in MEMBERLESS:
            return True
        described = described or s.get("members") is not None
        empty = empty or s.get("state") == "EMPTY"
    if empty or (len(samples) >= UNDESCRIBED_SAMPLES and not described):
        return False
    return None


class MemberTies:
    """member id -> (worker, attempt, how it was tied), built sample by sample as the run goes."""

    def __init__(self, run_id: str):
        self.run_id = run_id
        self.of: dict[str, tuple[str, int, str]] = {}

    def update(self, sample: dict, alive: list[tuple[str, int, float]]) -> list[dict]:
        """Tie the sample's new members; `alive` = (worker, attempt, started_at) of the processes living now.
        Returns the new ties, to be recorded."""
        new = []
        untied = []
        for m in sample.get("members") or []:
            mid = m.get("member")
            if not mid or mid in self.of:
                continue
            named = parse_client_id(m.get("client"), self.run_id)
            if named:
                self.of[mid] = (*named, "client.id")
                new.append(mid)
            else:
                untied.append(mid)
        taken = {(w, a) for w, a, _ in self.of.values()}
        candidates = [(w, a) for w, a, started in alive if started <= sample["t"] and (w, a) not in taken]
        if len(untied) == 1 and len(candidates) == 1:
            self.of[untied[0]] = (*candidates[0], "first appearance")
            new.append(untied[0])
        return [{"tie": mid, "worker": self.of[mid][0], "attempt": self.of[mid][1], "by": self.of[mid][2],
                 "t": sample["t"]} for mid in new]

    def load(self, records: list[dict]) -> None:
        for r in records:
            self.of[r["tie"]] = (r["worker"], r["attempt"], r.get("by", "client.id"))

    def member_of(self, worker: str, attempt: int) -> set[str]:
        return {mid for mid, (w, a, _) in self.of.items() if (w, a) == (worker, attempt)}

    def attempt_of(self, member: str) -> tuple[str, int] | None:
        got = self.of.get(member)
        return None if got is None else (got[0], got[1])

    def unidentified(self, samples: list[dict]) -> list[str]:
        return sorted({m["member"] for s in samples for m in (s.get("members") or [])
                       if m.get("partitions") and m.get("member") not in self.of})


def owned(sample: dict, ties: MemberTies, worker: str, attempt: int, slot_partitions, in_group: bool) -> set[int]:
    """The partitions this attempt owned in this sample. An attempt tied to no member may be any member that
    is tied to none: it is given their partitions (the report warns that such members are not identified)."""
    if not in_group:
        return set(slot_partitions)
    members = sample.get("members") or []
    mine = ties.member_of(worker, attempt)
    if not mine:
        mine = {m.get("member") for m in members if m.get("member") not in ties.of}
    return {p for m in members if m.get("member") in mine for p in m.get("partitions") or []}


def first_work(samples: list[dict], ties: MemberTies, worker: str, attempt: int, started_at: float,
               slot_partitions, in_group: bool) -> float | None:
    """The time of the first sample showing this attempt's own work: a committed offset of a partition it
    owned grew, or an effect on it appeared, after the sample that first showed it owning that partition
    (after its start, for a consumer that assigns: its predecessor was dead before it started). None while
    the group's mode is undecided (in_group None)."""
    if in_group is None:
        return None
    since: dict[int, tuple[float, int]] = {}       # partition -> (owned since, committed then)
    for s in samples:
        if s["t"] < started_at:
            continue
        mine = owned(s, ties, worker, attempt, slot_partitions, in_group)
        committed, effects = s.get("committed") or {}, s.get("effects") or {}
        for p in list(since):
            if p not in mine:
                del since[p]
        for p in mine:
            if p not in since:
                if committed.get(p) is None:
                    continue
                since[p] = (s["t"] if in_group else started_at, committed[p])
                if in_group:
                    continue
            t0, c0 = since[p]
            if (committed.get(p) or 0) > c0 or (effects.get(p) or 0) > t0:
                return s["t"]
    return None


def _before(samples: list[dict], t: float) -> dict | None:
    """The last sample taken at or before t."""
    i = bisect.bisect_right([s["t"] for s in samples], t)
    return samples[i - 1] if i else None


def _just_after(samples: list[dict], t: float) -> dict | None:
    """The sample the death woke, if it came within BASELINE_WINDOW_S: where the victim's commits stood."""
    i = bisect.bisect_right([s["t"] for s in samples], t)
    if i < len(samples) and samples[i]["t"] - t <= BASELINE_WINDOW_S and samples[i].get("committed") is not None:
        return samples[i]
    return None


def kill_state(samples, ties, kill: dict, started_at: float, slot_partitions, ends: dict,
               in_group: bool) -> dict:
    """What the victim owned and had done at the last sample before its kill, and so what the kill could do."""
    w, a, t = kill.get("worker"), kill.get("attempt"), kill["time"]
    last = _before(samples, t)
    mine = sorted(owned(last, ties, w, a, slot_partitions, in_group)) if last else []
    committed = (_just_after(samples, t) or last or {}).get("committed") or {}
    worked = first_work([s for s in samples if s["t"] <= t], ties, w, a, started_at, slot_partitions, in_group)
    left = [p for p in mine if committed.get(p) is None or committed[p] < ends.get(p, 0)]
    if not mine or worked is None:
        state = IDLE
    elif not left:
        state = DONE
    else:
        state = DAMAGE
    return {"state": state, "partitions": mine, "committed": {p: committed.get(p) for p in mine},
            "unfinished": left}


def stall_seconds(samples: list[dict], kill_time: float, partitions, committed_then: dict) -> float | None:
    """From the kill until each of these partitions (the victim's unfinished ones) committed past where it
    stood at the kill, whoever owned it by then; None when they never did (or there were none). Where it
    stood is the sample taken right after the death (the sampler is woken by it) when there is one within
    BASELINE_WINDOW_S: the victim's commits between the last sample before the kill and its death are its
    own, not the group's recovery."""
    if not partitions:
        return None
    waiting = {p: committed_then.get(p) or 0 for p in partitions}
    woken = _just_after(samples, kill_time)
    if woken is not None:
        waiting = {p: max(off, woken["committed"].get(p) or 0) for p, off in waiting.items()}
    for s in samples:
        if s["t"] <= (woken or {"t": kill_time})["t"]:
            continue
        c = s.get("committed") or {}
        for p in [p for p, off in waiting.items() if (c.get(p) or 0) > off]:
            del waiting[p]
        if not waiting:
            return round(s["t"] - kill_time, 3)
    return None


def owners_at(samples: list[dict], ties: MemberTies, partition: int, t: float, ended: dict) -> list:
    """The attempts that may have applied an effect on this partition at time t: the members owning it in the
    samples just before and just after t, less an attempt that had ended (killed or exited) before t.
    [(worker, attempt) or (None, member id) when the member is unidentified]."""
    times = [s["t"] for s in samples]
    i = bisect.bisect_right(times, t)
    around = samples[max(0, i - 1):i + 1]
    out = []
    for s in around:
        for m in s.get("members") or []:
            if partition not in (m.get("partitions") or []):
                continue
            who = ties.attempt_of(m.get("member")) or (None, m.get("member"))
            if who[0] is not None and ended.get(who, float("inf")) < t:
                continue
            if who not in out:
                out.append(who)
    return out
