"""Kafka's StorageTool reads a cluster id that starts with '-' as an option: we never make one."""

import uuid

from harness.stack import local_kafka


def test_cluster_id_never_starts_with_a_dash(monkeypatch):
    dash_first = uuid.UUID(bytes=b"\xf8" + bytes(15))        # base64 of 0xF8... starts with '-'
    normal = uuid.UUID(bytes=b"\x10" * 16)
    draws = iter([dash_first, dash_first, normal])
    monkeypatch.setattr(local_kafka.uuid, "uuid4", lambda: next(draws))
    cid = local_kafka._cluster_id()
    assert cid == "EBAQEBAQEBAQEBAQEBAQEA" and len(cid) == 22


def test_many_random_cluster_ids():
    ids = [local_kafka._cluster_id() for _ in range(2000)]
    assert not [i for i in ids if i.startswith("-")]
    assert all(len(i) == 22 for i in ids)
