"""Every experiment's predictors on hand-made crash logs: exact per crash, bounds for random kills."""

import pytest

from harness.checker.predict import predict
from harness.experiments import REGISTRY, get
from harness.run.params import RunParams


def crash(msg, point, unacked=(), acked_unapplied=(), produced=(), worker="w0"):
    return {"point": point, "message_id": msg, "unacked": list(unacked), "acked_unapplied": list(acked_unapplied),
            "produced": list(produced), "time": 1.0, "worker": worker, "attempt": 1}


def kill(worker="w0"):
    return {"point": "random", "message_id": None, "time": 1.0, "worker": worker, "by": "supervisor"}


def expectations(p):
    return {e.metric: (e.op, e.value) for e in p.expectations}


def test_offset_before_loses_what_was_acknowledged_and_never_applied():
    p = predict(get("offset-before"), [crash("b", "after-commit-before-effect", acked_unapplied=["b", "c"]),
                                       crash("e", "after-poll-before-commit")])
    assert expectations(p) == {"ledger.duplicates": ("==", 0), "ledger.lost": ("==", 2)}
    assert p.lost_ids == {"b", "c"} and p.exact and not p.inconsistent


def test_offset_after_duplicates_per_id_at_every_point():
    p = predict(get("offset-after"), [crash("b", "after-effect-before-commit", unacked=["a", "b"]),
                                      crash("d", "after-poll-before-effect", unacked=["a"]),
                                      crash("e", "after-commit")])
    assert expectations(p)["ledger.duplicates"] == ("==", 3)
    assert p.duplicate_counts == {"a": 2, "b": 1}


def test_dedupe_turns_redeliveries_into_hits():
    p = predict(get("dedupe"), [crash("b", "inside-effect-txn", unacked=["a"]),
                                crash("c", "after-effect-before-commit", unacked=["c"])])
    assert expectations(p) == {"ledger.duplicates": ("==", 0), "ledger.dedupe_hits": ("==", 2),
                               "ledger.lost": ("==", 0)}


def test_eos_family_predicts_both_sides():
    c = [crash("b", "after-produce-before-txn-commit", unacked=["a", "b"], produced=["a", "b"])]
    e = expectations(predict(get("eos-boundary"), c))
    assert e["ledger.duplicates"] == ("==", 2) and e["kafka.read_uncommitted.duplicates"] == ("==", 2)
    assert e["kafka.read_committed.duplicates"] == ("==", 0) and e["kafka.read_committed.lost"] == ("==", 0)
    e = expectations(predict(get("eos-dedupe"), c))
    assert e["ledger.duplicates"] == ("==", 0) and e["ledger.dedupe_hits"] == ("==", 2)
    e = expectations(predict(get("eos"), [crash("b", "after-txn-commit", produced=["b"])]))
    assert "ledger.duplicates" not in e and e["kafka.read_uncommitted.duplicates"] == ("==", 1)


def test_streams_reads_its_one_list_and_the_postgres_variant_adds_the_ledger():
    c = [crash("b", "after-process-before-commit", unacked=["a", "b"])]
    plain = get("eos-streams")
    assert expectations(predict(plain, c))["kafka.read_uncommitted.duplicates"] == ("==", 2)
    pg = plain.resolve(RunParams("eos-streams", effect="postgres"))
    assert pg.stores.ledger and expectations(predict(pg, c))["ledger.duplicates"] == ("==", 2)


def test_zombie_expects_a_fenced_producer_and_an_exact_topic():
    e = expectations(predict(get("zombie"), []))
    assert e["fault.zombie.fenced"] == ("==", 1) and e["kafka.read_committed.lost"] == ("==", 0)


def test_random_kills_bound_only_what_a_kill_point_can_cause():
    p = predict(get("offset-after"), [kill(), kill(), kill()], inflight_max=10)
    e = expectations(p)
    assert not p.exact and e["ledger.duplicates"] == ("<=", 30) and e["ledger.lost"] == ("==", 0)
    e = expectations(predict(get("offset-before"), [kill()], inflight_max=4))
    assert e["ledger.lost"] == ("<=", 4) and e["ledger.duplicates"] == ("==", 0)   # never duplicates
    # a described crash and a random kill together: the bound sits on top of what is known
    e = expectations(predict(get("offset-after"), [crash("b", "after-effect-before-commit", unacked=["b"]), kill()]))
    assert e["ledger.duplicates"] == ("<=", 2)


def test_a_crash_record_contradicting_its_kill_point_is_flagged():
    p = predict(get("offset-before"), [crash("b", "after-poll-before-commit", unacked=["a"])])
    assert p.inconsistent and "after-poll-before-commit" in p.inconsistent[0]


@pytest.mark.parametrize("name", list(REGISTRY))
def test_every_declaration_is_whole(name):
    e = REGISTRY[name]
    assert e.proves and e.steps and e.expected and e.predictors
    assert len(set(e.point_names())) == len(e.point_names())
    assert e.default_point is None if not e.kill_points else e.default_point in e.point_names()
    # A Python loop (run by PythonWorkers, or by a launcher built on it that adds arguments), or its own launcher.
    from harness.experiments.launch import PythonWorkers
    assert e.loop is not None or e.launcher is not None
    assert e.loop is None or e.launcher is None or isinstance(e.launcher, PythonWorkers)
    if e.loop is not None and e.kill_points:      # Streams owns its commit: its one point is inside the topology
        assert e.kill_points[-1].before is None, "the gap after the last step is a kill point"
    assert all(p.says for p in e.kill_points)


def test_a_zombie_freeze_bounds_the_aborted_copies_it_may_leave():
    # Frozen inside a transaction, the zombie's open records are aborted by the fencing: 0 or up to
    # commit_every copies for read_uncommitted readers, and read_committed stays exact.
    e = expectations(predict(get("zombie"), [], inflight_max=1, interruptions=1))
    assert e["kafka.read_uncommitted.duplicates"] == ("<=", 1)
    assert e["kafka.read_committed.duplicates"] == ("==", 0) and e["kafka.read_committed.lost"] == ("==", 0)


def test_unplanned_deaths_turn_exact_numbers_into_bounds():
    p = predict(get("offset-after"), [crash("b", "after-effect-before-commit", unacked=["b"])], interruptions=2)
    assert not p.exact and expectations(p)["ledger.duplicates"] == ("<=", 3)
