"""The transactions the harness's own stop may leave open, fenced before the final read.

An interrupt or a time limit SIGKILLs busy workers where they stand, and a planned crash just before the stop
has no successor to fence what it left open. Either leaves a transaction that only the broker's transaction
timeout would end: a read_committed reader would wait on it and the checker would call it the system's
hanging transaction. Ours are fenced here, by the transactional.ids our launchers know.
"""

from __future__ import annotations

from ..core.errors import HarnessError

FENCE_S = 10.0


def fence_stopped(r, launcher, result, log) -> None:
    """A transactional worker the stop SIGKILLed (an interrupt, a time limit) may have left a transaction
    open: the harness's doing, not the system's. So may one whose planned crash came just before the stop,
    with no successor started yet to fence it (result.unrestarted_at_stop). A producer with its
    transactional.id calls init_transactions(), which fences it and aborts that transaction before the
    final read, so no read_committed reader waits on it and the checker finds no hanging transaction. Each
    such worker's entry says what was done ("fenced", or why not) and its transactional_ids
    (reporting/stop_excuse.py ties by them). Ours only (Python, Java, Kafka Streams;
    launcher.open_transactional_ids), not a custom one's."""
    entries = (getattr(result, "killed_at_stop", None) or []) + (getattr(result, "unrestarted_at_stop", None) or [])
    ids_of = getattr(launcher, "open_transactional_ids", None)
    if not (entries and r.exp.stores.output and ids_of):
        return
    import re
    from confluent_kafka import KafkaException, Producer
    from ..clients.kafka_client import config
    from ..clients.kafka_logging import client_config
    for entry in entries:
        m = re.fullmatch(r"w(\d+)", str(entry.get("worker")))
        if not m:
            continue
        try:
            entry["transactional_ids"] = ids = list(ids_of(r, int(m.group(1)), int(entry.get("attempt") or 1)))
            for tid in ids:
                # The harness's own logger: librdkafka's retries while the broker aborts the old transaction go
                # to the clients' log file, not as raw %4|... lines over the terminal's scoreboard.
                Producer(config(r.stack.bootstrap_servers, {"transactional.id": tid, **client_config()})
                         ).init_transactions(FENCE_S)
            entry["transaction"] = "fenced"
        except HarnessError as e:
            entry["transaction"] = f"not fenced: {e}"[:200]
        except KafkaException as e:
            entry["transaction"] = f"not fenced: {e.args[0].str() if e.args else e}"[:200]
    log(f"[{r.names.run_id}] fenced the transactional.id of {sum(e.get('transaction') == 'fenced' for e in entries)} "
        f"worker(s) the stop SIGKILLed or left without a successor, aborting what they had left open")
