"""checker/producer_epochs.py on hand-made worker logs: which epoch each transaction began and ended with."""

from harness.checker import producer_epochs as pe

def prefix(proc: int = 100) -> str:
    return (f"13:26:48.844 DEBUG pid={proc} [kafka-producer-network-thread | p] o.a.k.c.p.i.TransactionManager: "
            f"[Producer clientId=p, transactionalId=t] ")


PREFIX = prefix()


def epoch(pid: int, e: int, proc: int = 100) -> str:
    return f"{prefix(proc)}ProducerId set to {pid} with epoch {e}"


def end(txn: int, attempt: int = 1, result: str = "commit", proc: int = 100) -> str:
    return f"eos-txn TXN-END pid={proc} worker=w0 attempt={attempt} txn={txn} result={result} records=1"


def start(attempt: int, proc: int = 100) -> str:
    return f"eos-txn START pid={proc} worker=w0 attempt={attempt} transactional_id=t"


TV2_LOG = "\n".join([start(1), epoch(-1, -1), f"{PREFIX}Updating isTV2 enabled to true with FinalizedFeaturesEpoch 9",
                     epoch(7, 0), epoch(7, 1), end(1), epoch(7, 2), end(2), epoch(7, 3), end(3, result="abort")])
TV1_LOG = "\n".join([start(1), f"{PREFIX}Updating isTV2 enabled to false with FinalizedFeaturesEpoch 3", epoch(7, 0),
                     end(1), end(2), end(3)])


def test_version_2_moves_the_epoch_at_every_transaction_end():
    txns = pe.transactions(TV2_LOG)
    assert [(t["txn"], t["result"], t["began"], t["ended"]) for t in txns] == [
        (1, "commit", [7, 0], [7, 1]), (2, "commit", [7, 1], [7, 2]), (3, "abort", [7, 2], [7, 3])]
    s = pe.summary(txns, "java", pe.client_tv2(TV2_LOG))
    # judged on the two commits; the abort is counted apart
    assert (s["transactions_ended"], s["commits_epoch_bumped"], s["aborts"], s["version_seen"]) == (3, 2, 1, "2")
    assert s["processes_said_tv2"] == {"enabled": 1, "disabled": 0}


def test_before_version_2_the_epoch_stays_for_the_producer_s_life():
    s = pe.summary(pe.transactions(TV1_LOG), "java", pe.client_tv2(TV1_LOG))
    assert (s["transactions_ended"], s["commits_epoch_bumped"], s["version_seen"]) == (3, 0, "before 2")
    assert s["processes_said_tv2"] == {"enabled": 0, "disabled": 1}


def test_a_restart_s_new_epoch_is_not_counted_as_a_transaction_s_bump():
    # attempt 2 fences attempt 1 with InitProducerId: epoch 0 -> 1, then its transactions keep epoch 1
    text = "\n".join([start(1), epoch(7, 0), end(1), start(2, proc=200), epoch(-1, -1, proc=200),
                      epoch(7, 1, proc=200), end(1, attempt=2, proc=200), end(2, attempt=2, proc=200)])
    txns = pe.transactions(text)
    assert [(t["attempt"], t["began"], t["ended"]) for t in txns] == [(1, [7, 0], [7, 0]), (2, [7, 1], [7, 1]),
                                                                     (2, [7, 1], [7, 1])]
    assert pe.summary(txns, "java")["version_seen"] == "before 2"
    # a later process that got the same pid starts from nothing too
    reused = "\n".join([start(1), epoch(7, 0), end(1), start(2), epoch(7, 1), end(1, attempt=2)])
    assert [t["began"] for t in pe.transactions(reused)] == [[7, 0], [7, 1]]


def test_a_zombie_s_lines_among_its_replacement_s_are_told_apart_by_process():
    # process 100 (attempt 1) is frozen inside its transaction 2; 200 (attempt 2) fences it (epoch 2 -> 3) and
    # commits; the zombie wakes up and its late lines land between the replacement's
    text = "\n".join([start(1), epoch(7, 0), epoch(7, 1), end(1), start(2, proc=200), epoch(7, 3, proc=200),
                      epoch(7, 4, proc=200), end(1, attempt=2, proc=200), epoch(7, 2), end(2),
                      epoch(7, 5, proc=200), end(2, attempt=2, proc=200)])
    txns = pe.transactions(text)
    assert [(t["attempt"], t["txn"], t["began"], t["ended"]) for t in txns] == [
        (1, 1, [7, 0], [7, 1]), (2, 1, [7, 3], [7, 4]), (1, 2, [7, 1], [7, 2]), (2, 2, [7, 4], [7, 5])]
    assert pe.summary(txns, "java")["version_seen"] == "2"


def test_an_abort_does_not_decide_the_version():
    # before version 2, an abort after an error the client recovers from bumps the epoch: not version 2
    text = "\n".join([start(1), epoch(7, 0), end(1), epoch(7, 1), end(2, result="abort"), end(3)])
    s = pe.summary(pe.transactions(text), "java")
    assert (s["version_seen"], s["aborts"], s["aborts_epoch_bumped"]) == ("before 2", 1, 1)


def test_a_hostile_log_is_read_without_failing_and_big_numbers_are_not_epochs():
    text = "\n".join([start(1), f"{PREFIX}ProducerId set to {'9' * 5000} with epoch 1", epoch(7, 0),
                      "eos-txn TXN-END pid=100 worker=w0 attempt=1 txn=" + "9" * 5000 + " result=commit", end(1)])
    assert [(t["txn"], t["began"]) for t in pe.transactions(text)] == [(1, [7, 0])]


def test_an_epoch_overflow_s_new_producer_id_counts_as_a_bump():
    assert pe.bumped({"began": [7, 32766], "ended": [8, 0]}) is True


def test_mixed_and_unknown_are_said_as_such():
    # KIP-890: a producer may end its first transaction the old way, then upgrade
    upgraded = "\n".join([start(1), epoch(7, 0), end(1), epoch(7, 1), end(2)])
    assert pe.summary(pe.transactions(upgraded), "java")["version_seen"] == "mixed"
    no_epochs = "\n".join([start(1), end(1), end(2)])
    s = pe.summary(pe.transactions(no_epochs), "java")
    assert (s["transactions_ended"], s["commits_with_epoch_known"], s["version_seen"]) == (2, 0, "unknown")
    assert pe.summary([], "java")["version_seen"] == "unknown"


def test_summarize_reads_every_slot_log_and_never_follows_a_link(tmp_path):
    (tmp_path / "w0.log").write_text(TV2_LOG)
    (tmp_path / "w1.log").write_text(TV1_LOG)
    (tmp_path / "planted.log").symlink_to(tmp_path / "w0.log")
    s = pe.summarize(tmp_path, "java")
    assert (s["transactions_ended"], s["commits_epoch_bumped"], s["version_seen"]) == (6, 2, "mixed")
