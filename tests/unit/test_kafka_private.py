"""The local Kafka node's folder is its owner's only (no broker started here: the folders and the records)."""

import os
import stat

from harness.stack import pidrecord
from harness.core.safefile import PRIVATE_UMASK
from harness.stack.local_kafka import LocalKafka


def _mode(p):
    return stat.S_IMODE(os.lstat(p).st_mode)


def test_a_new_node_folder_is_made_owner_only(tmp_path):
    k = LocalKafka(tmp_path)
    k.make_private()
    assert {_mode(d) for d in (k.home, k.data, k.logs)} == {0o700}
    assert PRIVATE_UMASK & 0o077 == 0o077, "the JVM's files would be open to others"


def test_a_folder_an_older_harness_left_open_is_narrowed(tmp_path):
    k = LocalKafka(tmp_path)
    for d in (k.home, k.data, k.logs):
        d.mkdir(mode=0o755, exist_ok=True)
        d.chmod(0o755)
    k.make_private()
    assert {_mode(d) for d in (k.home, k.data, k.logs)} == {0o700}


def test_a_linked_data_folder_is_not_chmodded_through_the_link(tmp_path):
    elsewhere = tmp_path / "not-ours"
    elsewhere.mkdir()
    elsewhere.chmod(0o755)
    k = LocalKafka(tmp_path / "state")
    k.home.mkdir(parents=True)
    os.symlink(elsewhere, k.data)
    k.make_private()
    assert _mode(elsewhere) == 0o755


def test_config_and_pid_record_are_owner_only(tmp_path):
    k = LocalKafka(tmp_path)
    k.write_config(1, 2)
    pidrecord.write(k.pidfile, pidrecord.PidRecord(pid=1, start_time=1, marks=[]))
    assert _mode(k.props) == _mode(k.home / "log4j2.properties") == _mode(k.pidfile) == 0o600
