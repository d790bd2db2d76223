"""Crash-test harness for message delivery semantics on real Kafka and PostgreSQL.

A network cannot deliver a message exactly once; a system can apply its effect
exactly once. This package runs the experiments that show both claims on a real
broker and a real database (see README.md).

Every PostgreSQL connection of the harness, its workers and the processes it
starts requires SCRAM: libpq (16 or newer) is told so by `PGREQUIREAUTH`, set
here, before any module can connect. A program that took over the server's
port (PostgreSQL died, another user bound it) and asks for a cleartext or MD5
password then gets no password: the connection fails instead. Channel binding
is libpq's default, `prefer`: used when the server offers it over TLS.
"""

import os

__version__ = "0.1.0"

REQUIRED_AUTH = "scram-sha-256"
os.environ["PGREQUIREAUTH"] = REQUIRED_AUTH
