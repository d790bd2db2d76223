"""`harness clean`: remove runs' topics and tables, and nothing else.

Only names with the harness prefix (topics `harness.<run-id>.*`, tables in
the `harness` schema named <kind>_<slug> for the kinds in naming.TABLE_KINDS, exactly as
`naming.slug` makes them) are ever deleted, so pointing the harness at a
shared cluster cannot remove anyone else's data. Table names read back from
Postgres are never trusted as SQL: they are filtered by that pattern and
quoted as identifiers when dropped.
"""

from . import kafka_client, kafka_logging
from .stack.model import Stack
from .workload import tables
from .workload.naming import RunNames, TOPIC_PREFIX, run_tables


def clean_runs(stack: Stack, run_ids: list[str], all_runs: bool) -> tuple[int, int]:
    from confluent_kafka.admin import AdminClient
    admin = AdminClient(kafka_client.config(stack.bootstrap_servers, kafka_logging.client_config()))
    topics = [t for t in admin.list_topics(timeout=15).topics if t.startswith(TOPIC_PREFIX)]
    if not all_runs:
        wanted = {t for r in run_ids for t in RunNames(r).topics()}
        topics = [t for t in topics if t in wanted]
    if topics:
        for fut in admin.delete_topics(topics, operation_timeout=30).values():
            try:
                fut.result(timeout=60)
            except Exception:  # noqa: BLE001 - already gone is fine
                pass
    admin.poll(0)   # hand the client's log lines to the logger
    existing = tables.list_run_tables(stack.postgres_dsn)
    if not all_runs:
        wanted_tables = set().union(*(run_tables(r) for r in run_ids))
        existing = [t for t in existing if t.split(".", 1)[1] in wanted_tables]
    tables.drop(stack.postgres_dsn, existing)
    return len(topics), len(existing)
