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
import re

CLIENT_ID_SEPARATOR = "."
DIGITS = re.compile(r"[0-9]{1,9}")

# What a kill could do, judged from the samples around it.
DAMAGE = "could do damage"            # owned partitions, had worked since its start, had work left
DONE = "after its last commit"        # its partitions were all committed to their end
IDLE = "before joining"               # owned nothing, or had done nothing since it started
KILL_STATES = (DAMAGE, DONE, IDLE)
# A sample this soon after a kill (the sampler is woken by the death) shows where the victim's commits stood.
BASELINE_WINDOW_S = 0.1
EPSILON_S = 1e-6

# The states of a group with no member: what consumers that assign() leave (EMPTY once they commit) or no
# group yet (DEAD, or not found). Any other state (STABLE, PREPARING_REBALANCING, ASSIGNING, ...) has members.
MEMBERLESS = ("EMPTY", "DEAD", "UNKNOWN", None)


def client_id(run_id: str, worker: str, attempt: int) -> str:
    """The client.id a consumer is asked to use (HARNESS_CLIENT_ID), naming its run, slot and attempt."""
    return CLIENT_ID_SEPARATOR.join((run_id, worker, str(attempt)))


def parse_client_id(text, run_id: str) -> tuple[str, int] | None:
    parts = str(text or "").rsplit(CLIENT_ID_SEPARATOR, 2)     # run ids hold a dot themselves
    if len(parts) != 3 or parts[0] != run_id or not DIGITS.fullmatch(parts[2]):
        return None
    return parts[1], int(parts[2])


def _offsets(d) -> dict | None:
    if not isinstance(d, dict):
        return None
    out = {}
    for k, v in d.items():
        if not (isinstance(k, str) and DIGITS.fullmatch(k) or isinstance(k, int)) \
                or not isinstance(v, (int, float)) or isinstance(v, bool):
            return None
        out[int(k)] = v
    return out


def normalize(sample: dict) -> dict | None:
    """A sample read back from JSON (integer partitions again), or None when it is not one: the file is
    read as written by anyone."""
    t, members = sample.get("t"), sample.get("members")
    if not isinstance(t, (int, float)) or isinstance(t, bool):
        return None
    if members is not None:
        if not isinstance(members, list) or not all(
                isinstance(m, dict) and isinstance(m.get("member"), str) and isinstance(m.get("partitions"), list)
                and all(isinstance(q, int) and not isinstance(q, bool) for q in m["partitions"]) for m in members):
            return None
    state = sample.get("state")
    return {"t": float(t), "members": members, "state": state if isinstance(state, str) else None,
            "committed": _offsets(sample.get("committed")), "effects": _offsets(sample.get("effects")),
            "protocol": sample.get("protocol") if isinstance(sample.get("protocol"), str) else None}


class Mode:
    """Did the consumers join the group? Decided sample by sample: True once a sample showed a member or a
    membered state; False once the group was seen EMPTY (offsets committed, nobody joined) with no member
    ever; None while undecided (no group yet, or the broker would not describe it: then nobody's work can
    be placed, and no random kill strikes)."""

    def __init__(self):
        self.joined = False
        self.empty = False

    def add(self, sample: dict) -> bool | None:
        if sample.get("members") or sample.get("state") not in MEMBERLESS:
            self.joined = True
        self.empty = self.empty or sample.get("state") == "EMPTY"
        return self.value

    @property
    def value(self) -> bool | None:
        return True if self.joined else (False if self.empty else None)


def group_mode(samples: list[dict]) -> bool | None:
    mode = Mode()
    for s in samples:
        mode.add(s)
    return mode.value


class MemberTies:
    """member id -> (worker, attempt, how it was tied), built sample by sample as the run goes. A client.id
    is believed only for an attempt that is running; two members naming one attempt are both left
    unidentified (a consumer that gives every process the same id, or one that lies)."""

    def __init__(self, run_id: str):
        self.run_id = run_id
        self.of: dict[str, tuple[str, int, str]] = {}
        self.disputed: set = set()                 # attempts two members claimed

    def update(self, sample: dict, alive: list[tuple[str, int, float]]) -> list[dict]:
        """Tie the sample's new members; `alive` = (worker, attempt, started_at) of the processes living now.
        Returns the new ties, to be recorded."""
        running = {(w, a) for w, a, started in alive if started <= sample["t"]}
        new, untied = [], []
        for m in sample.get("members") or []:
            mid = m.get("member")
            if not mid or mid in self.of:
                continue
            named = parse_client_id(m.get("client"), self.run_id)
            if named and named in running and named not in self.disputed:
                if self.member_of(*named):
                    self.disputed.add(named)
                    for other in self.member_of(*named):
                        del self.of[other]
                    new = [x for x in new if x in self.of]
                    continue
                self.of[mid] = (*named, "client.id")
                new.append(mid)
            elif not named:
                untied.append(mid)
        taken = {(w, a) for w, a, _ in self.of.values()} | self.disputed
        candidates = [wa for wa in running if wa not in taken]
        if len(untied) == 1 and len(candidates) == 1:
            self.of[untied[0]] = (*candidates[0], "first appearance")
            new.append(untied[0])
        return [{"tie": mid, "worker": self.of[mid][0], "attempt": self.of[mid][1], "by": self.of[mid][2],
                 "t": sample["t"]} for mid in new]

    def load(self, records: list[dict]) -> None:
        for r in records:
            mid, w, a = r.get("tie"), r.get("worker"), r.get("attempt")
            if isinstance(mid, str) and isinstance(w, str) and isinstance(a, int) and not isinstance(a, bool):
                if (w, a) in {(x, y) for x, y, _ in self.of.values()}:
                    self.disputed.add((w, a))
                self.of[mid] = (w, a, str(r.get("by", "client.id")))
        for mid in [m for m, (w, a, _) in self.of.items() if (w, a) in self.disputed]:
            del self.of[mid]

    def member_of(self, worker: str, attempt: int) -> set[str]:
        return {mid for mid, (w, a, _) in self.of.items() if (w, a) == (worker, attempt)}

    def attempt_of(self, member: str) -> tuple[str, int] | None:
        got = self.of.get(member)
        return None if got is None else (got[0], got[1])

    def unidentified(self, samples: list[dict]) -> list[str]:
        return sorted({m["member"] for s in samples for m in (s.get("members") or [])
                       if m.get("partitions") and m.get("member") not in self.of})


def owned(sample: dict, ties: MemberTies, worker: str, attempt: int, slot_partitions, in_group) -> set[int] | None:
    """The partitions this attempt owned in this sample; None when the sample cannot say (the group was not
    described). An attempt tied to no member may be any member tied to none: it is given their partitions
    (the report warns that such members are not identified)."""
    if not in_group:
        return set(slot_partitions)
    members = sample.get("members")
    if members is None:
        return None
    mine = ties.member_of(worker, attempt)
    if not mine:
        mine = {m.get("member") for m in members if m.get("member") not in ties.of}
    return {p for m in members if m.get("member") in mine for p in m.get("partitions") or []}


class Work:
    """Has this attempt worked yet? Fed sample by sample (live, one per new sample; `first_work` for a whole
    list): a committed offset of a partition it owned grew, or an effect on it appeared, after the sample
    that first showed it owning that partition (after its start, for a consumer that assigns: its
    predecessor was dead before it started)."""

    def __init__(self, worker: str, attempt: int, started_at: float, slot_partitions):
        self.worker, self.attempt, self.started_at, self.slot = worker, attempt, started_at, slot_partitions
        self.since: dict[int, tuple[float, int]] = {}      # partition -> (owned since, committed then)
        self.at: float | None = None

    def add(self, s: dict, ties: MemberTies, in_group) -> float | None:
        if self.at is not None or in_group is None or s["t"] < self.started_at:
            return self.at
        mine = owned(s, ties, self.worker, self.attempt, self.slot, in_group)
        committed, effects = s.get("committed"), s.get("effects") or {}
        if mine is None or committed is None:
            return None                                  # this sample cannot say: the next one may
        for p in list(self.since):
            if p not in mine:
                del self.since[p]
        for p in mine:
            if p not in self.since:
                if committed.get(p) is None:
                    continue
                self.since[p] = (s["t"] if in_group else self.started_at, committed[p])
                if in_group:
                    continue
            t0, c0 = self.since[p]
            if (committed.get(p) or 0) > c0 or (effects.get(p) or 0) > t0:
                self.at = s["t"]
                return self.at
        return None


def first_work(samples: list[dict], ties: MemberTies, worker: str, attempt: int, started_at: float,
               slot_partitions, in_group) -> float | None:
    """When the samples first show this attempt's own work (`Work`); None if they never do, or while the
    group's mode is undecided (in_group None)."""
    work = Work(worker, attempt, started_at, slot_partitions)
    for s in samples:
        if work.add(s, ties, in_group) is not None:
            return work.at
    return None


class Timeline:
    """The samples in time order, with their times at hand for lookups."""

    def __init__(self, samples: list[dict]):
        self.samples = sorted(samples, key=lambda s: s["t"])
        self.times = [s["t"] for s in self.samples]

    def before(self, t: float, field: str | None = None) -> dict | None:
        """The last sample taken at or before t (that has `field`, when given)."""
        i = bisect.bisect_right(self.times, t)
        while i > 0:
            s = self.samples[i - 1]
            if field is None or s.get(field) is not None:
                return s
            i -= 1
        return None

    def just_after(self, t: float) -> dict | None:
        """The sample the death woke, if it came within BASELINE_WINDOW_S: where the victim's commits stood."""
        i = bisect.bisect_right(self.times, t)
        if i < len(self.samples) and self.samples[i]["t"] - t <= BASELINE_WINDOW_S + EPSILON_S \
                and self.samples[i].get("committed") is not None:
            return self.samples[i]
        return None

    def around(self, t: float) -> list[dict]:
        """The samples just before and just after t."""
        i = bisect.bisect_right(self.times, t)
        return self.samples[max(0, i - 1):i + 1]

    def upto(self, t: float) -> list[dict]:
        return self.samples[:bisect.bisect_right(self.times, t)]


def kill_state(tl: Timeline, ties, kill: dict, started_at: float, slot_partitions, ends: dict, in_group) -> dict:
    """What the victim owned (the last sample before its kill that described the group), where its
    partitions' commits stood (the sample its death woke, else the last one read before it), whether it had
    worked, and so what the kill could do. Unknowns stay None: `committed` None, `unfinished` None."""
    w, a, t = kill.get("worker"), kill.get("attempt"), kill["time"]
    last = tl.before(t, "members" if in_group else None)
    mine = owned(last, ties, w, a, slot_partitions, in_group) if last else None
    mine = sorted(mine or [])
    stood = tl.just_after(t) or tl.before(t, "committed")
    if in_group and mine:
        later = before_takeover(tl, ties, w, a, t, mine)
        if later is not None and (stood is None or later["t"] > stood["t"]):
            stood = later
    committed = stood["committed"] if stood else None
    worked = first_work(tl.upto(t), ties, w, a, started_at, slot_partitions, in_group)
    left = None if committed is None else [p for p in mine if committed.get(p) is None
                                           or committed[p] < ends.get(p, 0)]
    if not mine or worked is None:
        state = IDLE
    elif left is not None and not left:
        state = DONE
    else:
        state = DAMAGE
    return {"state": state, "partitions": mine, "stood_at": stood["t"] if stood else None,
            "committed": {p: (committed or {}).get(p) for p in mine}, "unfinished": left,
            "owned_since": _owned_since(tl, ties, w, a, started_at, slot_partitions, in_group, mine, t)}


def before_takeover(tl: Timeline, ties, w, a, t: float, partitions) -> dict | None:
    """The last sample after the kill at `t` in which the group still listed the dead victim as the owner
    of all its `partitions` and nobody else owned any (a group hands them over only once the dead member's
    session has expired): a commit it shows on them is the victim's own, sent before its death. None when
    the first sample after the kill already shows otherwise, or cannot say (no members or no commits read,
    a victim tied to no member). A sample listing nobody (a rebalance, an empty group) ends the search: the
    partitions may have been someone else's since the sample before."""
    victim = ties.member_of(w, a)
    if not victim:
        return None
    found = None
    for s in tl.samples[bisect.bisect_right(tl.times, t):]:
        members, committed = s.get("members"), s.get("committed")
        if members is None or committed is None:
            break
        held = {p for m in members if m.get("member") in victim for p in m.get("partitions") or []}
        others = {p for m in members if m.get("member") not in victim for p in m.get("partitions") or []}
        if not set(partitions) <= held or others & set(partitions):
            break
        found = s
    return found


def _owned_since(tl: Timeline, ties, w, a, started_at, slot_partitions, in_group, partitions, t) -> dict:
    """partition -> when the victim was first seen owning it, continuously up to its kill."""
    since: dict = {}
    for s in tl.upto(t):
        if s["t"] < started_at:
            continue
        mine = owned(s, ties, w, a, slot_partitions, in_group)
        if mine is None:
            continue
        for p in partitions:
            if p in mine:
                since.setdefault(p, s["t"] if in_group else started_at)
            else:
                since.pop(p, None)
    return since


def stall_seconds(tl: Timeline, kill_time: float, partitions, committed_then: dict,
                  stood_at: float | None = None) -> float | None:
    """From the kill until each of these partitions (the victim's unfinished ones) committed past where it
    stood at the kill, whoever owned it by then; None when they never did, when there were none, or when
    where they stood is unknown. Where it stood (`committed_then`) is read at `stood_at` when kill_state
    found it after the kill (a sample before any other member owned them); else it is the sample taken
    right after the death (the sampler is woken by it) when there is one within BASELINE_WINDOW_S: the
    victim's commits between the last sample before the kill and its death are its own, not the group's
    recovery."""
    if not partitions or any(committed_then.get(p) is None for p in partitions):
        return None
    waiting = {p: committed_then[p] for p in partitions}
    since = kill_time
    if stood_at is not None and stood_at > kill_time:
        since = stood_at                       # committed_then was read there already
    elif (woken := tl.just_after(kill_time)) is not None:
        waiting = {p: max(off, woken["committed"].get(p) or 0) for p, off in waiting.items()}
        since = woken["t"]
    start = bisect.bisect_right(tl.times, since)
    for s in tl.samples[start:]:
        c = s.get("committed") or {}
        for p in [p for p, off in waiting.items() if (c.get(p) or 0) > off]:
            del waiting[p]
        if not waiting:
            return round(s["t"] - kill_time, 3)
    return None


def owners_at(tl: Timeline, ties: MemberTies, partition: int, t: float, ended: dict) -> list:
    """The attempts that may have applied an effect on this partition at time t: the members owning it in the
    samples just before and just after t, less an attempt that had ended (killed or exited) before t.
    [(worker, attempt) or (None, member id) when the member is unidentified]."""
    out = []
    for s in tl.around(t):
        for m in s.get("members") or []:
            if partition not in (m.get("partitions") or []):
                continue
            who = ties.attempt_of(m.get("member")) or (None, m.get("member"))
            if who[0] is not None and ended.get(who, float("inf")) < t:
                continue
            if who not in out:
                out.append(who)
    return out
