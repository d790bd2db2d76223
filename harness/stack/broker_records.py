"""What the brokers themselves wrote for one run: its transactions' coordinator records and the markers.

A lost payment under a held EndTxn is the client's story (its history, its
errors) until the broker's own logs say what it applied: KAFKA-17754 is a
late EndTxn that the coordinator takes for the transaction after the one it
belonged to. Kafka's own `DumpLogSegments` (what `kafka-dump-log.sh` runs; the
pinned release's tools, which read the logs of every release the harness runs)
reads a node's log folder: `--transaction-log-decoder` decodes the
`__transaction_state` records (a transactional.id's producer id, epoch, state
and partitions at each step), `--offsets-decoder` the offsets a group
committed, and the data partitions show their records and the COMMIT and
ABORT markers with their offsets. This module runs it on the local nodes'
folders (every partition has a replica on each node of the 3-node cluster;
the fullest copy is read, as a follower may lag), reading the files, never
the brokers, and parses its text into rows; `harness hunt --explain` (run/explain.py) lays them beside a run.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from ..core.errors import HarnessError

MAIN = "org.apache.kafka.tools.DumpLogSegments"     # in kafka-tools (the harness's tools class path)
DUMP_TIMEOUT_S = 120
_FIELD = re.compile(r"(\w+): (\S+)")


def partition_folders(data_dirs: list[Path], prefix: str) -> list[Path]:
    """The log folders of the partitions named `prefix`-N, one per partition: of the nodes' copies, the one with
    the most bytes of log (a follower out of the in-sync replicas lags the leader; right after a run it may
    not hold the run's last records yet)."""
    best: dict[str, tuple[int, Path]] = {}
    for d in data_dirs:
        for p in sorted(d.glob(f"{glob_escape(prefix)}-*")):
            if p.is_dir() and not p.is_symlink() and p.name[len(prefix) + 1:].isdigit():
                size = sum(f.stat().st_size for f in p.glob("*.log"))
                if p.name not in best or size > best[p.name][0]:
                    best[p.name] = (size, p)
    return [best[k][1] for k in sorted(best, key=lambda n: int(n.rpartition("-")[2]))]


def glob_escape(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)


def dump(lib: Path, folders: list[Path], decoder: str | None = None) -> str:
    """DumpLogSegments' text for every segment of these partition folders (one JVM)."""
    files = [str(f) for folder in folders for f in sorted(folder.glob("*.log"))]
    if not files:
        return ""
    cmd = ["java", "-cp", f"{lib}/*", MAIN, "--print-data-log", "--files", ",".join(files)]
    if decoder:
        cmd.append(decoder)
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=DUMP_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise HarnessError(f"Kafka's DumpLogSegments could not read the node's log folder: {e}") from None
    if done.returncode != 0:
        raise HarnessError(f"Kafka's DumpLogSegments failed (exit {done.returncode}): "
                           f"{(done.stderr.strip().splitlines() or ['no output'])[-1][:300]}")
    return done.stdout


def records(text: str) -> list[dict]:
    """Each record of a dump: its partition (folder name), offset, time (ms), the batch's producer id and epoch,
    and either `marker` (COMMIT/ABORT, a control record) or `key` and `payload`."""
    out, batch, partition = [], {}, None
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("Dumping "):
            partition = Path(line[len("Dumping "):].strip()).parent.name
        elif line.startswith("baseOffset:"):
            batch = dict(_FIELD.findall(line))
        elif line.startswith("| offset:"):
            f = dict(_FIELD.findall(line.split(" key: ")[0].split(" endTxnMarker: ")[0]))
            row = {"partition": partition, "offset": int(f["offset"]), "time": int(f.get("CreateTime", -1)),
                   "producer_id": int(batch.get("producerId", -1)), "epoch": int(batch.get("producerEpoch", -1))}
            if " endTxnMarker: " in line:
                row["marker"] = line.split(" endTxnMarker: ")[1].split()[0]
            else:
                key, _, payload = line.partition(" key: ")[2].partition(" payload: ")
                row.update(key=key, payload=payload)
            out.append(row)
    return out


def transaction_steps(text: str, id_contains: str) -> list[dict]:
    """The coordinator's records (`--transaction-log-decoder`, JSON key and payload) of the transactional ids
    that contain `id_contains`, in time order: id, producer id, epoch, state, partitions, time (ms). A
    tombstone (an expired id, no payload) is left out."""
    steps = []
    for r in records(text):
        try:
            key = json.loads(r.get("key") or "")["data"]["transactionalId"]
            value = json.loads(r.get("payload") or "")["data"]
        except (ValueError, KeyError, TypeError):
            continue
        if not isinstance(key, str) or id_contains not in key or not isinstance(value, dict):
            continue
        parts = [f"{p.get('topic')}-{n}" for p in value.get("transactionPartitions") or [] if isinstance(p, dict)
                 for n in p.get("partitionIds") or []]
        steps.append({"transactional_id": key, "producer_id": value.get("producerId"),
                      "epoch": value.get("producerEpoch"), "state": str(value.get("transactionStatus")),
                      "partitions": sorted(parts), "time": r["time"], "log_offset": r["offset"]})
    return sorted(steps, key=lambda s: (s["time"], s["log_offset"]))
