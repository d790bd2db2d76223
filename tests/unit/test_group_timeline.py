"""A consumer group's timeline read back (checker/group_timeline.py), on hand-made samples.

Samples are what runtime/group_sampler.py records: the members and their
partitions, the committed offsets, the latest effect per partition. Two workers
w0 and w1 on partitions 0 and 1; w0 attempt 1 is killed at 10.0 and attempt 2
starts at 10.1.
"""

from harness.checker import group_timeline as gt
from harness.experiments.custom.custom_report import kill_warnings
from harness.experiments.custom.custom_witnesses import Placer, witnesses

RUN = "20261203T000000.000-custom-abcdef"


def member(mid, worker=None, attempt=None, parts=(), client=None):
    return {"member": mid, "client": client or (gt.client_id(RUN, worker, attempt) if worker else "rdkafka"),
            "partitions": list(parts)}


def sample(t, members, committed, effects=None):
    return {"t": t, "members": members, "committed": committed, "effects": effects or {}}


def tied(samples, alive=None):
    """The ties of these samples, every attempt a member names running since 0 unless `alive` says else."""
    if alive is None:
        alive = {gt.parse_client_id(m["client"], RUN) for s in samples for m in s["members"] or []} - {None}
        alive = [(w, a, 0.0) for w, a in alive]
    ties = gt.MemberTies(RUN)
    for s in samples:
        ties.update(s, list(alive))
    return ties


def test_a_member_is_tied_by_its_client_id_or_as_the_only_new_process():
    ties = gt.MemberTies(RUN)
    got = ties.update(sample(1.0, [member("m-a", "w0", 1, [0])], {}), [("w0", 1, 0.5)])
    assert got == [{"tie": "m-a", "worker": "w0", "attempt": 1, "by": "client.id", "t": 1.0}]
    # a client that ignored HARNESS_CLIENT_ID: the one attempt alive and untied when the member appears
    got = ties.update(sample(2.0, [member("m-a", "w0", 1, [0]), member("m-b", parts=[1])], {}),
                      [("w0", 1, 0.5), ("w1", 1, 1.5)])
    assert got[0]["tie"] == "m-b" and (got[0]["worker"], got[0]["attempt"], got[0]["by"]) == ("w1", 1, "first appearance")
    # two new members and two candidates: nobody can tell which is which
    two = gt.MemberTies(RUN)
    assert two.update(sample(1.0, [member("x", parts=[0]), member("y", parts=[1])], {}),
                      [("w0", 1, 0.5), ("w1", 1, 0.5)]) == []
    assert two.unidentified([sample(1.0, [member("x", parts=[0]), member("y", parts=[1])], {})]) == ["x", "y"]
    # another run's client id is not ours
    assert gt.parse_client_id(gt.client_id("other-run", "w0", 1), RUN) is None
    assert gt.parse_client_id("w0.1", RUN) is None


def test_work_counts_only_after_the_attempt_owned_the_partition():
    # w0 attempt 2 starts at 10.1; the dead predecessor's last commit lands in the sample at 10.2 (before the
    # new member owns anything): it must not make attempt 2 busy.
    samples = [sample(10.2, [member("old", "w0", 1, [0])], {0: 50}),
               sample(10.4, [], {0: 55}),
               sample(12.0, [member("new", "w0", 2, [0])], {0: 55}),
               sample(12.2, [member("new", "w0", 2, [0])], {0: 55}),
               sample(12.4, [member("new", "w0", 2, [0])], {0: 60})]
    ties = tied(samples)
    assert gt.first_work(samples, ties, "w0", 2, 10.1, [0], True) == 12.4
    assert gt.first_work(samples[:4], ties, "w0", 2, 10.1, [0], True) is None
    # an effect on the owned partition after it owned it is work too, before any commit
    effect = samples[:3] + [sample(12.2, [member("new", "w0", 2, [0])], {0: 55}, {0: 12.1})]
    assert gt.first_work(effect, ties, "w0", 2, 10.1, [0], True) == 12.2
    # an effect from before it owned the partition (its predecessor's) is not
    old_effect = samples[:3] + [sample(12.2, [member("new", "w0", 2, [0])], {0: 55}, {0: 10.05})]
    assert gt.first_work(old_effect, ties, "w0", 2, 10.1, [0], True) is None


def test_a_consumer_that_assigns_works_once_its_slots_commits_grow_between_samples_after_its_start():
    samples = [sample(10.0, [], {0: 50}), sample(10.2, [], {0: 55}), sample(10.4, [], {0: 55}),
               sample(10.6, [], {0: 58})]
    ties = gt.MemberTies(RUN)
    # the growth 50 -> 55 at 10.2 may be the predecessor's: the baseline is the first sample after the start
    assert gt.first_work(samples, ties, "w0", 2, 10.1, [0], False) == 10.6
    assert gt.first_work(samples, ties, "w0", 2, 10.1, [1], False) is None


def test_each_kill_is_counted_by_what_its_victim_could_damage():
    ends = {0: 100, 1: 100}
    samples = [sample(1.0, [member("a", "w0", 1, [0]), member("b", "w1", 1, [1])], {0: 0, 1: 0}),
               sample(1.2, [member("a", "w0", 1, [0]), member("b", "w1", 1, [1])], {0: 10, 1: 100}),
               sample(3.0, [member("a", "w0", 1, [0]), member("b", "w1", 1, [1]), member("c", "w0", 2)],
                      {0: 10, 1: 100})]
    ties = tied(samples)
    working = gt.kill_state(gt.Timeline(samples), ties, {"worker": "w0", "attempt": 1, "time": 1.3}, 0.5, [0], ends, True)
    assert working["state"] == gt.DAMAGE and working["partitions"] == [0] and working["unfinished"] == [0]
    assert working["committed"] == {0: 10}
    done = gt.kill_state(gt.Timeline(samples), ties, {"worker": "w1", "attempt": 1, "time": 1.3}, 0.5, [1], ends, True)
    assert done["state"] == gt.DONE and done["unfinished"] == []
    idle = gt.kill_state(gt.Timeline(samples), ties, {"worker": "w0", "attempt": 2, "time": 3.1}, 2.9, [0], ends, True)
    assert idle["state"] == gt.IDLE and idle["partitions"] == []


def test_the_stall_runs_until_every_unfinished_partition_of_the_victim_commits_again_whoever_owns_it():
    samples = [sample(10.0, [], {0: 10, 1: 20}), sample(11.0, [], {0: 12, 1: 20}), sample(16.5, [], {0: 12, 1: 21})]
    assert gt.stall_seconds(gt.Timeline(samples), 10.0, [0, 1], {0: 10, 1: 20}) == 6.5
    assert gt.stall_seconds(gt.Timeline(samples), 10.0, [0], {0: 10}) == 1.0
    assert gt.stall_seconds(gt.Timeline(samples), 10.0, [], {}) is None
    assert gt.stall_seconds(gt.Timeline(samples), 10.0, [1], {1: 30}) is None      # never committed past: unknown, not 0


def test_the_owner_of_an_effect_is_the_member_around_it_still_alive():
    samples = [sample(1.0, [member("a", "w0", 1, [0, 1])], {}),
               sample(1.2, [member("a", "w0", 1, [0]), member("b", "w1", 1, [1])], {})]
    ties = tied(samples)
    assert gt.owners_at(gt.Timeline(samples), ties, 0, 1.1, {}) == [("w0", 1)]
    assert gt.owners_at(gt.Timeline(samples), ties, 1, 1.1, {}) == [("w0", 1), ("w1", 1)]        # moved between the samples
    assert gt.owners_at(gt.Timeline(samples), ties, 1, 1.1, {("w0", 1): 1.05}) == [("w1", 1)]   # w0 attempt 1 was dead by then
    unknown = [sample(1.0, [member("z", parts=[0])], {})]
    assert gt.owners_at(gt.Timeline(unknown), gt.MemberTies(RUN), 0, 1.0, {}) == [(None, "z")]


def test_a_duplicate_with_no_kill_of_its_first_applier_is_put_on_the_group_change():
    samples = [sample(1.0, [member("a", "w0", 1, [0, 1]), member("b", "w1", 1, [])], {}),
               sample(2.0, [member("a", "w0", 1, [0]), member("b", "w1", 1, [1])], {})]
    ties = tied(samples)
    placer = Placer(gt.Timeline(samples), ties, True, [], {"w0": [0], "w1": [1]}, {})
    kills = [{"worker": "w0", "attempt": 1, "pid": 5, "time": 9.0}]
    seen, explained, _, _ = witnesses({"p": [(1.1, None, None), (2.1, None, None)]}, [], kills, placer,
                                      {"p": (1, 3)}, t0=0.0)
    w = seen[0]
    assert w["explained_by"] == "group change" and w["kills"] == [] and explained == {}
    assert w["effects"][-1] == {"t": 2.1, "worker": "w1", "attempt": 1, "by": "placed"}
    # the same with w0 attempt 1 killed between the effects: that kill explains it
    kills = [{"worker": "w0", "attempt": 1, "pid": 5, "time": 1.5}]
    samples2 = [sample(1.0, [member("a", "w0", 1, [0, 1])], {}), sample(1.2, [member("a", "w0", 1, [0, 1])], {}),
                sample(2.0, [member("b", "w1", 1, [0, 1])], {})]
    placer = Placer(gt.Timeline(samples2), tied(samples2), True, [], {"w0": [0], "w1": [1]}, {("w0", 1): 1.5})
    seen, explained, _, _ = witnesses({"p": [(1.1, None, None), (2.1, None, None)]}, [], kills, placer,
                                      {"p": (1, 3)}, t0=0.0)
    assert seen[0]["explained_by"] == "kill" and seen[0]["kills"][0]["pid"] == 5 and explained == {0: 1}
    assert [(e["worker"], e["attempt"]) for e in seen[0]["effects"]] == [("w0", 1), ("w1", 1)]


def test_warnings_when_most_kills_could_do_nothing_or_none_could_strike():
    harmless = [{"state": gt.DONE}, {"state": gt.DONE}, {"state": gt.IDLE}, {"state": gt.DAMAGE}]
    got = kill_warnings(harmless, None, None)
    assert len(got) == 1 and got[0].startswith("3 of 4 kill(s) struck a worker that could do no damage (2 after")
    assert kill_warnings([{"state": gt.DAMAGE}] * 3 + [{"state": gt.DONE}], None, None) == []
    fast = kill_warnings([], finished_at=12.5, first_start=10.0)
    assert len(fast) == 1 and "committed every payment 2.50 s after it started, before any kill could strike" in fast[0]
    assert kill_warnings([], finished_at=None, first_start=10.0) == []


def test_in_a_group_the_victims_commits_until_another_member_owns_its_partition_are_its_own():
    # The sample the death woke came late (10.3, a busy machine), but the group had not handed partition 0
    # to anyone yet (w1 took it at 11.5, once w0's session expired): the 14 it shows is w0's, sent before
    # it died. Before: the stall was counted from the last sample before the kill, so w0's own commit looked
    # like the group's recovery 0.3 s after the kill.
    w0, w1 = member("m-0", "w0", 1, [0]), member("m-1", "w1", 1, [1])
    samples = [sample(9.9, [w0, w1], {0: 10, 1: 50}), sample(10.3, [w0, w1], {0: 14, 1: 51}),
               sample(11.5, [member("m-1", "w1", 1, [0, 1])], {0: 14, 1: 52}),
               sample(12.5, [member("m-1", "w1", 1, [0, 1])], {0: 15, 1: 53})]
    tl, ties = gt.Timeline(samples), tied(samples)
    st = gt.kill_state(tl, ties, {"worker": "w0", "attempt": 1, "time": 10.0}, 9.0, [0], {0: 100, 1: 100}, True)
    assert (st["committed"], st["stood_at"]) == ({0: 14}, 10.3)
    assert gt.stall_seconds(tl, 10.0, st["unfinished"], st["committed"], st["stood_at"]) == 2.5
    # another member already owned it in the first sample after the kill: nothing after the kill is the baseline
    early = [samples[0], sample(10.3, [member("m-1", "w1", 1, [0, 1])], {0: 14, 1: 51}), samples[3]]
    st = gt.kill_state(gt.Timeline(early), tied(early), {"worker": "w0", "attempt": 1, "time": 10.0}, 9.0, [0],
                       {0: 100, 1: 100}, True)
    assert (st["committed"], st["stood_at"]) == ({0: 10}, 9.9)
    assert gt.stall_seconds(gt.Timeline(early), 10.0, [0], st["committed"], st["stood_at"]) == 0.3


def test_a_sample_that_lists_nobody_or_a_victim_without_its_partitions_ends_the_search():
    # w1 took partition 0 at 11.0 and committed 20 by 11.4; no sample showed it; at 11.5 a rebalance listed
    # nobody: the 20 there is the recovery's, not the victim's, and must not be where the victim stood.
    w0, w1 = member("m-0", "w0", 1, [0]), member("m-1", "w1", 1, [1])
    samples = [sample(9.9, [w0, w1], {0: 10, 1: 50}), sample(10.3, [w0, w1], {0: 14, 1: 51}),
               sample(11.5, [], {0: 20, 1: 52}), sample(12.5, [member("m-1", "w1", 1, [0, 1])], {0: 25, 1: 53})]
    tl, ties = gt.Timeline(samples), tied(samples)
    assert gt.before_takeover(tl, ties, "w0", 1, 10.0, [0])["t"] == 10.3
    rebalancing = [samples[0], sample(10.3, [member("m-0", "w0", 1, []), w1], {0: 20, 1: 51}), samples[3]]
    assert gt.before_takeover(gt.Timeline(rebalancing), tied(samples), "w0", 1, 10.0, [0]) is None
    assert gt.before_takeover(tl, gt.MemberTies(RUN), "w0", 1, 10.0, [0]) is None     # untied: cannot say


def test_the_victims_own_commits_before_its_death_are_not_the_groups_recovery():
    # the last sample before the kill at 10.0 shows 10; the victim committed 14 before dying; the sample the
    # death woke (10.02) shows it; the group commits again only at 12.5
    samples = [sample(9.9, [], {0: 10}), sample(10.02, [], {0: 14}), sample(10.2, [], {0: 14}),
               sample(12.5, [], {0: 15})]
    assert gt.stall_seconds(gt.Timeline(samples), 10.0, [0], {0: 10}) == 2.5
    # no sample soon enough after the kill: where it stood is the last sample before it
    late = [sample(9.9, [], {0: 10}), sample(10.3, [], {0: 14})]
    assert gt.stall_seconds(gt.Timeline(late), 10.0, [0], {0: 10}) == 0.3
    ties = gt.MemberTies(RUN)
    st = gt.kill_state(gt.Timeline(samples), ties, {"worker": "w0", "attempt": 1, "time": 10.0}, 9.0, [0], {0: 100}, False)
    assert st["committed"] == {0: 14}


def test_nobodys_work_is_placed_before_the_group_shows_whether_its_consumers_joined():
    # The first sample of a run whose consumers subscribe: no group yet (DEAD) by the time it was described,
    # but commits and effects by w0 (which joined first and owns both partitions) read a moment later.
    first = {**sample(1.0, [], {0: 0, 1: 400}, {1: 1.3}), "state": "DEAD"}
    assert gt.group_mode([first]) is None
    assert gt.first_work([first], gt.MemberTies(RUN), "w1", 1, 0.5, [1], gt.group_mode([first])) is None
    joined = {**sample(1.4, [member("a", "w0", 1, [0, 1]), member("b", "w1", 1)], {0: 0, 1: 420}), "state": "STABLE"}
    assert gt.group_mode([first, joined]) is True
    # consumers that assign leave an EMPTY group with offsets, and never a member
    assert gt.group_mode([first, {**sample(2.0, [], {0: 5, 1: 400}), "state": "EMPTY"}]) is False
    # the first describe of a group that does not exist yet fails (not found): undecided, not "assign"
    undescribed = {**sample(1.0, None, {0: 260, 1: 260}, {0: 1.3}), "state": None}
    assert gt.group_mode([undescribed]) is None
    assert gt.first_work([undescribed], gt.MemberTies(RUN), "w0", 1, 0.5, [0], gt.group_mode([undescribed])) is None
    # a broker that never describes the group (not allowed, say): undecided for good; no work is placed
    assert gt.group_mode([undescribed] * 50) is None
    # a group whose members all died and left: still a group
    left = {**sample(3.0, [], {0: 9, 1: 500}), "state": "EMPTY"}
    assert gt.group_mode([first, joined, left]) is True


def test_a_client_id_that_only_looks_like_ours_is_not_believed_and_never_raises():
    ties = gt.MemberTies(RUN)
    crafted = [member("x", client=f"{RUN}.w0.²", parts=[0]), member("y", client=f"{RUN}.w0.99999999999", parts=[1])]
    assert gt.parse_client_id(f"{RUN}.w0.²", RUN) is None
    assert ties.update(sample(1.0, crafted, {}), [("w0", 1, 0.5), ("w1", 1, 0.5)]) == []
    # a client.id naming an attempt that is not running (a later one, or a dead one) is not believed either
    assert gt.MemberTies(RUN).update(sample(1.0, [member("z", "w0", 7, [0])], {}), [("w0", 1, 0.5)]) == []
    liar = gt.MemberTies(RUN)
    liar.update(sample(1.0, [member("z", "w0", 7, [0])], {}), [("w0", 1, 0.5), ("w1", 1, 0.5)])
    assert "z" not in liar.of


def test_two_members_naming_one_attempt_are_both_left_unidentified():
    ties = gt.MemberTies(RUN)
    first = sample(1.0, [member("a", "w0", 1, [0, 1])], {})
    ties.update(first, [("w0", 1, 0.5), ("w1", 1, 0.5)])
    assert ties.attempt_of("a") == ("w0", 1)
    # w1's process claims w0's id: neither member is believed from now on
    both = sample(1.2, [member("a", "w0", 1, [0]), member("b", "w0", 1, [1])], {})
    ties.update(both, [("w0", 1, 0.5), ("w1", 1, 0.5)])
    assert ties.attempt_of("a") is None and ties.attempt_of("b") is None and ties.disputed == {("w0", 1)}
    loaded = gt.MemberTies(RUN)
    loaded.load([{"tie": "a", "worker": "w0", "attempt": 1}, {"tie": "b", "worker": "w0", "attempt": 1},
                 {"tie": 5, "worker": None}])
    assert loaded.of == {} and loaded.disputed == {("w0", 1)}


def test_a_failed_describe_before_a_kill_does_not_hide_what_the_victim_owned():
    ends = {0: 100}
    samples = [sample(1.0, [member("a", "w0", 1, [0])], {0: 0}), sample(1.2, [member("a", "w0", 1, [0])], {0: 10}),
               {**sample(1.4, None, {0: 12}), "state": None}]       # the group not described this time
    tl = gt.Timeline(samples)
    st = gt.kill_state(tl, tied(samples), {"worker": "w0", "attempt": 1, "time": 1.45}, 0.5, [0], ends, True)
    assert st["state"] == gt.DAMAGE and st["partitions"] == [0] and st["committed"] == {0: 12}


def test_unread_commits_leave_the_kills_numbers_unknown_not_zero():
    samples = [{**sample(1.0, [member("a", "w0", 1, [0])], None), "committed": None},
               {**sample(1.2, [member("a", "w0", 1, [0])], None), "committed": None},
               sample(3.0, [member("b", "w0", 2, [0])], {0: 50})]
    tl = gt.Timeline(samples)
    st = gt.kill_state(tl, tied(samples), {"worker": "w0", "attempt": 1, "time": 1.3}, 0.5, [0], {0: 100}, True)
    assert st["committed"] == {0: None} and st["unfinished"] is None
    assert gt.stall_seconds(tl, 1.3, [0], st["committed"]) is None


def test_a_sample_exactly_the_window_after_the_kill_is_its_baseline():
    tl = gt.Timeline([sample(1.4, [], {0: 10}), sample(1.6, [], {0: 14}), sample(2.5, [], {0: 15})])
    assert gt.stall_seconds(tl, 1.5, [0], {0: 10}) == 1.0


def test_read_back_lines_that_are_not_samples_are_skipped(tmp_path):
    import json
    from harness.experiments.custom.custom_report import read_timeline
    path = tmp_path / "group.jsonl"
    good = sample(1.0, [member("a", "w0", 1, [0])], {"0": 5})
    path.write_text("\n".join(json.dumps(x) for x in [
        good, {"t": 2.0, "members": "abc"}, {"t": 2.1, "members": [], "committed": {"x": 1}},
        {"t": 2.2, "members": [], "committed": [1]}, {"t": "soon", "members": []},
        {"t": 2.3, "members": [{"member": "m", "partitions": ["p"]}]}, {"tie": "m"},
        {"session_timeout_ms": "forever", "protocol": 7}]) + "\nnot json\n")
    tl, ties, meta = read_timeline(path)
    assert [s["t"] for s in tl.samples] == [1.0, 2.1, 2.2]
    assert tl.samples[0]["committed"] == {0: 5} and tl.samples[1]["committed"] is None
    assert meta["session_timeout_ms"] is None and meta["protocol"] is None
    loaded = gt.MemberTies(RUN)
    loaded.load(ties)
    assert loaded.of == {}


def test_the_usual_at_most_once_loss_is_put_on_the_kill_after_the_commit_that_passed_it():
    # w0 attempt 1 commits past offset 7 of partition 0 before applying it, and dies at 2.05; the sample its
    # death woke (2.06) is the first to show the commit, when w0 attempt 1 no longer owns anything.
    samples = [sample(1.8, [member("a", "w0", 1, [0])], {0: 5}), sample(2.0, [member("a", "w0", 1, [0])], {0: 6}),
               sample(2.06, [member("b", "w0", 2, [])], {0: 9})]
    kills = [{"worker": "w0", "attempt": 1, "pid": 9, "time": 2.05}]
    placer = Placer(gt.Timeline(samples), tied(samples), True, [], {"w0": [0]}, {("w0", 1): 2.05})
    seen, _, lost, _ = witnesses({}, ["lost7"], kills, placer, {"lost7": (0, 7)}, t0=0.0)
    assert seen[0]["explained_by"] == "kill" and seen[0]["kills"][0]["pid"] == 9 and lost == {0: 1}
