"""The broker's side of a run (harness hunt --explain) on hand-made DumpLogSegments text: records and markers
parsed, the coordinator's steps of one run's transactional ids, and the judgement of each held EndTxn: applied to
the next transaction only when the one it belonged to ended while it was held, the next began, and the
coordinator ended that one right after it landed."""

from harness.run import explain as e
from harness.stack import broker_records as br

TXN = "harness-R1-eos-x-worker-0"


def txn_line(offset, t, state, parts, txid=TXN, pid=7, epoch=0):
    payload = ('{"version":"0","data":{"producerId":%d,"producerEpoch":%d,"transactionTimeoutMs":60000,'
               '"transactionStatus":"%s","transactionPartitions":[%s],"transactionLastUpdateTimestampMs":%d}}'
               % (pid, epoch, state, ",".join('{"topic":"%s","partitionIds":[%s]}' % (p[0], ",".join(map(str, p[1]))) for p in parts), t))
    return (f"baseOffset: {offset} lastOffset: {offset} count: 1 producerId: -1 producerEpoch: -1 isControl: false\n"
            f"| offset: {offset} CreateTime: {t} keySize: 51 valueSize: 120 sequence: -1 headerKeys: [] key: "
            f'{{"type":"0","data":{{"transactionalId":"{txid}"}}}} payload: {payload}\n')


def data_line(offset, t, key, pid=7, control=None):
    head = f"baseOffset: {offset} lastOffset: {offset} count: 1 producerId: {pid} producerEpoch: 0 " \
           f"isTransactional: true isControl: {'true' if control else 'false'} CreateTime: {t}\n"
    if control:
        return head + f"| offset: {offset} CreateTime: {t} keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] " \
                      f"endTxnMarker: {control} coordinatorEpoch: 0\n"
    return head + f"| offset: {offset} CreateTime: {t} keySize: 10 valueSize: 9 sequence: 0 headerKeys: [] " \
                  f"key: {key} payload: {{\"a\": 1}}\n"


OUT = [("out", [0])]
BOTH = [("out", [0]), ("__consumer_offsets", [2])]
# Transaction 1 (pay-1) ends at 1000 ms; its held EndTxn was taken at 500 ms and lands at 4500 ms, when
# transaction 2 (pay-2, its offsets added) is Ongoing; 20 ms later the coordinator commits transaction 2.
TXN_LOG = ("Dumping /d/__transaction_state-1/00000000000000000000.log\n"
           + txn_line(0, 100, "Ongoing", OUT) + txn_line(1, 1000, "PrepareCommit", OUT)
           + txn_line(2, 1010, "CompleteCommit", []) + txn_line(3, 2000, "Ongoing", BOTH)
           + txn_line(4, 4520, "PrepareCommit", BOTH) + txn_line(5, 4530, "CompleteCommit", [])
           + txn_line(6, 50, "Ongoing", OUT, txid="harness-OTHER-worker-0", pid=9))
OUTPUT = ("Dumping /d/out-0/00000000000000000000.log\n" + data_line(0, 100, "pay-1") + data_line(1, 1005, "", control="COMMIT")
          + data_line(2, 2100, "pay-2") + data_line(3, 4800, "", control="ABORT"))


def test_each_partition_is_read_from_its_fullest_copy(tmp_path):
    for node, size in ((1, 10), (2, 30), (3, 20)):
        folder = tmp_path / f"kafka-{node}" / "data" / "__transaction_state-0"
        folder.mkdir(parents=True)
        (folder / "00000000000000000000.log").write_bytes(b"x" * size)
    (tmp_path / "kafka-1" / "data" / "__transaction_state-x").mkdir()        # not a partition
    assert br.partition_folders([tmp_path / f"kafka-{n}" / "data" for n in (1, 2, 3)], "__transaction_state") == \
        [tmp_path / "kafka-2" / "data" / "__transaction_state-0"]


def test_records_and_markers_parsed_with_their_partition_and_producer():
    rows = br.records(OUTPUT)
    assert [(r["partition"], r["offset"], r.get("key"), r.get("marker"), r["producer_id"]) for r in rows] == \
        [("out-0", 0, "pay-1", None, 7), ("out-0", 1, None, "COMMIT", 7), ("out-0", 2, "pay-2", None, 7),
         ("out-0", 3, None, "ABORT", 7)]
    assert [e.fate(rows, r) for r in rows if "key" in r] == ["COMMIT", "ABORT"]


def test_coordinator_steps_of_one_runs_transactional_ids_only():
    steps = br.transaction_steps(TXN_LOG, "harness-R1")
    assert [(s["state"], s["time"]) for s in steps] == [("Ongoing", 100), ("PrepareCommit", 1000),
                                                       ("CompleteCommit", 1010), ("Ongoing", 2000),
                                                       ("PrepareCommit", 4520), ("CompleteCommit", 4530)]
    assert steps[3]["partitions"] == ["__consumer_offsets-2", "out-0"] and steps[0]["producer_id"] == 7


def test_a_late_endtxn_is_applied_to_the_next_transaction_only_on_that_evidence():
    steps = br.transaction_steps(TXN_LOG, "harness-R1")
    late = {"action": "delay", "api": "EndTxn", "time": 4.5, "held_ms": 4000, "correlation_id": 14, "node": 3,
            "client_gone": True}
    j = e.judge(e.held_requests([late])[0], steps)
    assert j["applied_to_next"] and (j["steps_while_held"], j["completed_while_held"]) == (3, 1)
    assert j["next"] == {"state": "PrepareCommit", "after_ms": 20, "partitions": ["__consumer_offsets-2", "out-0"]}
    assert "same producer id 7 and epoch 0; +20 ms from its landing: PrepareCommit" in j["verdict"]
    v2 = br.transaction_steps(TXN_LOG.replace('"producerEpoch":0,"transactionTimeoutMs":60000,"transactionStatus":'
                                              '"Ongoing","transactionPartitions":[{"topic":"out","partitionIds":[0]},',
                                              '"producerEpoch":1,"transactionTimeoutMs":60000,"transactionStatus":'
                                              '"Ongoing","transactionPartitions":[{"topic":"out","partitionIds":[0]},'),
                              "harness-R1")
    assert v2[3]["epoch"] == 1          # transactions v2: the next transaction under a bumped epoch
    fenced = e.judge(e.held_requests([late])[0], v2)
    assert not fenced["applied_to_next"] and fenced["verdict"].startswith("fenced")
    own = e.judge(e.held_requests([{**late, "time": 0.9, "held_ms": 500}])[0], steps)     # nothing ended meanwhile
    assert not own["applied_to_next"] and "its own transaction" in own["verdict"]
    stamped = e.judge(e.held_requests([{**late, "time": 4.521}])[0], steps)     # the broker's ms stamp, 1 ms early
    assert stamped["applied_to_next"] and stamped["next"]["after_ms"] == -1
    unknown = e.judge(e.held_requests([late])[0], [])       # no coordinator record read: never a guess
    assert unknown["applied_to_next"] is None and unknown["verdict"].startswith("unknown")
    assert e.summary_lines({"held": [unknown]}) == ["broker side: 0 of 1 held EndTxn request(s) applied to the next "
                                                    "transaction, 1 unknown (no coordinator record found)"]
    idle = e.judge(e.held_requests([{**late, "time": 1.5, "held_ms": 800}])[0], steps)    # ended, none open yet
    assert not idle["applied_to_next"] and "no transaction open" in idle["verdict"]


def test_the_analysis_traces_a_lost_payment_and_the_offsets_the_late_commit_settled():
    offsets = br.records("Dumping /d/__consumer_offsets-2/00000000000000000000.log\n" + data_line(
        10, 2050, '{"type":"1","data":{"group":"g","topic":"in","partition":0}}').replace(
        'payload: {"a": 1}', 'payload: {"version":"3","data":{"offset":2}}') + data_line(11, 4525, "", control="COMMIT"))
    report = {"run_id": "R1", "environment": {"kafka_version": "3.9.1"}, "stack": {"consumer_group": "g"},
              "anomalies": {"lost_ids": ["pay-2"]}}
    proxy = [{"action": "delay", "api": "EndTxn", "time": 4.5, "held_ms": 4000, "correlation_id": 14, "node": 3}]
    x = e.analyse(report, proxy, br.transaction_steps(TXN_LOG, "harness-R1"), br.records(OUTPUT), offsets)
    assert x["offset_commits"] == [{"partition": "__consumer_offsets-2", "offset": 10, "time": 2050, "producer_id": 7,
                                    "epoch": 0, "committed": 2, "fate": "COMMIT"}]
    assert x["lost"] == [{"id": "pay-2", "records": [{"partition": "out-0", "offset": 2, "producer_id": 7, "epoch": 0,
                                                      "fate": "ABORT"}]}]
    assert e.summary_lines(x) == ["broker side: 1 of 1 held EndTxn request(s) applied to the next transaction "
                                  "(correlation ids 14)"]
    md = e.render_md(x)
    assert "applied to the next transaction" in md and "| __consumer_offsets-2 | 10 | 2 | 7 | 0 | COMMIT |" in md
    assert "- pay-2: out-0 offset 2 (producer 7 epoch 0), ABORT" in md
