"""The harness's own Kafka and PostgreSQL clients: settings, connections, logs, secrets kept out of argv.

One layer above core/. Every Kafka client's settings (the user's, then ours; the same for the Java
workers), every PostgreSQL connection with its bounded waits, how consumers take what has arrived,
librdkafka's log lines, and the secrets those settings may carry kept out of command lines. Kept apart
so that what must stay pure (the checker's judging) can be shown to import none of it.
"""
