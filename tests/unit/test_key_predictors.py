"""The idempotency-key mistakes' predictors on hand-made crash records and worker events."""

from harness.experiments.keys.key_predictors import expired_at_redelivery
from harness.checker.predict import predict
from harness.experiments import get
from harness.run.params import RunParams
from harness.core.errors import HarnessError

import pytest

from tests.unit.test_cli_errors import isolated  # noqa: F401 - the fixture


def crash(msg, point, unacked=(), acked_unapplied=(), t=100.0, **facts):
    return {"point": point, "message_id": msg, "unacked": list(unacked), "acked_unapplied": list(acked_unapplied),
            "produced": [], "time": t, "worker": "w0", "attempt": 1, **facts}


def kill():
    return {"point": "random", "message_id": None, "time": 1.0, "worker": "w0", "by": "supervisor"}


def redelivered(msg, t, took=0.002):
    return {"event": "redelivered", "worker": "w0", "attempt": 2, "t": t + took, "message_id": msg, "lookup_t": t,
            "done_t": t + took}


def expectations(p):
    return {e.metric: (e.op, e.value) for e in p.expectations}


def test_key_after_effect_charges_again_only_what_crashed_between_effect_and_key():
    p = predict(get("key-after-effect"), [crash("c", "after-effect-before-key", unacked=["a", "b", "c"]),
                                          crash("e", "after-key-before-commit", unacked=["e"]),
                                          crash("f", "after-effect-before-key", unacked=["f"])])
    assert expectations(p) == {"ledger.duplicates": ("==", 2), "ledger.dedupe_hits": ("==", 3),
                               "ledger.lost": ("==", 0)}
    assert p.duplicate_counts == {"c": 1, "f": 1} and p.hit_counts == {"a": 1, "b": 1, "e": 1}
    assert p.exact and not p.inconsistent


def test_key_after_effect_with_a_random_kill_is_bounded():
    p = predict(get("key-after-effect"), [crash("c", "after-effect-before-key", unacked=["c"]), kill()],
                inflight_max=5)
    e = expectations(p)
    assert e["ledger.duplicates"] == ("<=", 6) and e["ledger.dedupe_hits"] == ("<=", 5)
    assert e["ledger.lost"] == ("==", 0) and not p.exact


def test_key_before_effect_loses_the_payment_and_counts_its_redelivery_as_a_hit():
    p = predict(get("key-before-effect"), [crash("b", "after-key-before-effect", unacked=["a", "b"],
                                                 acked_unapplied=["b"]),
                                           crash("d", "after-effect-before-commit", unacked=["d"])])
    assert expectations(p) == {"ledger.duplicates": ("==", 0), "ledger.dedupe_hits": ("==", 3),
                               "ledger.lost": ("==", 1)}
    assert p.lost_ids == {"b"} and p.hit_counts == {"a": 1, "b": 1, "d": 1} and not p.inconsistent


def test_a_loss_at_a_point_that_declares_none_is_flagged():
    p = predict(get("key-before-effect"), [crash("d", "after-effect-before-commit", unacked=["d"],
                                                 acked_unapplied=["d"])])
    assert p.inconsistent


def test_key_per_attempt_duplicates_every_redelivery_and_expects_no_hit():
    p = predict(get("key-per-attempt"), [crash("b", "after-effect-before-commit", unacked=["a", "b"]),
                                         crash("d", "inside-effect-txn", unacked=["c"])])
    assert expectations(p) == {"ledger.duplicates": ("==", 3), "ledger.lost": ("==", 0),
                               "ledger.dedupe_hits": ("==", 0)}
    assert p.duplicate_counts == {"a": 1, "b": 1, "c": 1} and p.hit_counts == {}


def test_expiry_compares_each_keys_age_at_its_redelivery_with_the_ttl():
    c = crash("b", "after-effect-before-commit", unacked=["a", "b"], t=100.0,
              key_at={"a": 90.0, "b": 99.9}, dedupe_ttl=5.0)
    # a: 14 s old when it came again (expired); b: 4.1 s (still there). An earlier redelivery does not count.
    events = [redelivered("a", 50.0), redelivered("a", 104.0), redelivered("b", 104.0), redelivered("b", 200.0)]
    assert expired_at_redelivery(c, events) == {"a": True, "b": False}
    p = predict(get("key-expiry"), [c], events=events)
    assert expectations(p) == {"ledger.lost": ("==", 0), "ledger.duplicates": ("==", 1)}
    assert p.exact and p.duplicate_counts == {"a": 1}


def test_expiry_with_a_ttl_below_the_restart_delay_charges_every_redelivery_again():
    crashes = [crash(m, "after-effect-before-commit", unacked=[m], t=t, key_at={m: t - 0.01}, dedupe_ttl=1.0)
               for m, t in (("a", 10.0), ("b", 20.0))]
    events = [redelivered("a", 14.2), redelivered("b", 24.1)]
    p = predict(get("key-expiry"), crashes, events=events)
    assert expectations(p)["ledger.duplicates"] == ("==", 2) and p.duplicate_counts == {"a": 1, "b": 1}
    long = [dict(c, dedupe_ttl=60.0) for c in crashes]
    p = predict(get("key-expiry"), long, events=events)
    assert expectations(p)["ledger.duplicates"] == ("==", 0) and p.exact


def test_expiry_too_close_to_call_or_never_seen_again_is_a_bound_with_a_note():
    c = crash("a", "after-effect-before-commit", unacked=["a", "b"], t=10.0, key_at={"a": 9.0, "b": 9.0},
              dedupe_ttl=2.0)
    # a: 1.999 s old at its own purge (kept by it), 2.004 s when its transaction ended: another worker's purge
    # may have removed it in between. b never came again.
    p = predict(get("key-expiry"), [c], events=[redelivered("a", 10.999, took=0.005)])
    assert expectations(p)["ledger.duplicates"] == ("<=", 2) and not p.exact
    assert "too close" in p.note


def test_expiry_is_called_from_both_ends_of_the_lookup():
    c = crash("a", "after-effect-before-commit", unacked=["a"], t=10.0, key_at={"a": 9.0}, dedupe_ttl=2.0)
    assert expired_at_redelivery(c, [redelivered("a", 11.002)]) == {"a": True}      # its own purge removed it
    assert expired_at_redelivery(c, [redelivered("a", 10.99, took=0.005)]) == {"a": False}   # nobody could have
    assert expired_at_redelivery(c, [redelivered("a", 10.99, took=0.02)]) == {"a": None}


def test_expiry_without_recorded_key_times_is_not_guessed():
    c = crash("a", "after-effect-before-commit", unacked=["a"], t=10.0)
    assert expired_at_redelivery(c, [redelivered("a", 20.0)]) == {"a": None}


def test_the_ttl_belongs_to_key_expiry_only_and_the_restart_delay_to_every_experiment():
    RunParams("key-expiry", dedupe_ttl=1, restart_delay=4).validate()
    with pytest.raises(HarnessError, match="--dedupe-ttl applies to key-expiry only"):
        RunParams("dedupe", dedupe_ttl=1).validate()
    RunParams("offset-after", restart_delay=1).validate()      # the supervisor's: any experiment
    with pytest.raises(HarnessError, match="--restart-delay must be a number of seconds"):
        RunParams("offset-after", restart_delay=-1).validate()
    with pytest.raises(HarnessError, match="--dedupe-ttl must be a number of seconds"):
        RunParams("key-expiry", dedupe_ttl=-1).validate()
    p = RunParams("key-expiry", dedupe_ttl=60).resolve().params     # its own defaults fill what was not given
    assert p.dedupe_ttl == 60 and p.restart_delay == 0.05
    assert RunParams("key-expiry").resolve().params.dedupe_ttl == get("key-expiry").defaults["dedupe_ttl"]


def test_the_cli_refuses_a_ttl_for_another_experiment_before_anything_starts(isolated):  # noqa: F811
    import os
    from tests.conftest import harness
    from tests.unit.test_cli_errors import one_clear_line
    proc = harness("run", "offset-after", "--dedupe-ttl", "1", env=isolated)
    assert proc.returncode == 2
    one_clear_line(proc, "--dedupe-ttl applies to key-expiry only")
    assert not os.path.exists(isolated["HARNESS_HOME"])


def test_a_crash_records_every_kind_of_fact_its_experiment_passes():
    """KillSwitch.at's extra facts: lists of records or ids become ids, functions are called at the
    crash, other values (a key's write times, the TTL) are kept as they are."""
    from harness.runtime.evidence import fact

    class Rec:
        def __init__(self, i):
            self.i = i

        def key(self):
            return self.i.encode()
    assert fact([Rec("a"), Rec("b")]) == ["a", "b"]
    assert fact(lambda: ["c"]) == ["c"]                        # a service's row_only
    assert fact(lambda: {"a": 1.5}) == {"a": 1.5}              # key-expiry's key_at
    assert fact(0.5) == 0.5
