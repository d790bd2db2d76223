"""A program that took over PostgreSQL's port and asks for a cleartext password gets none.

When PostgreSQL died, another user's program could bind its port and ask reconnecting
clients for AuthenticationCleartextPassword: libpq sent the password. The fake server here
speaks the few bytes of the wire protocol that takes (refusing TLS, then asking for the
password in cleartext) and records whether a password message came. The harness's own
connection (and a worker's, in a fresh process whose environment asks for cleartext) must
fail without one, and the DSN handed to a custom consumer carries the requirement too.
"""

import socket
import struct
import subprocess
import sys
import threading

import psycopg
import pytest

from harness.experiments.custom.custom_launch import libpq_uri
from harness.stack import health

SSL_OR_GSS = (80877103, 80877104)
CLEARTEXT = b"R" + struct.pack("!ii", 8, 3)
PASSWORD = "not-for-strangers"


class CleartextAsker:
    """Accepts connections on a free 127.0.0.1 port and asks each for its password in cleartext."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []       # what came after the password request
        self.asked = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _read(self, conn, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = conn.recv(n - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(10)
                try:
                    while True:
                        length, code = struct.unpack("!ii", self._read(conn, 8))
                        rest = self._read(conn, length - 8)
                        if length == 8 and code in SSL_OR_GSS:
                            conn.sendall(b"N")          # no TLS, no GSS encryption: go on in the clear
                            continue
                        break                           # the startup message
                    conn.sendall(CLEARTEXT)
                    self.asked += 1
                    got = conn.recv(4096)
                    while got:
                        self.received.append(got)
                        got = conn.recv(4096)
                except (EOFError, OSError, struct.error):
                    pass

    def dsn(self) -> str:
        return f"postgresql://harness:{PASSWORD}@127.0.0.1:{self.port}/harness"

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def asker():
    a = CleartextAsker()
    yield a
    a.close()


def test_the_harness_s_connection_sends_no_password_to_a_server_asking_for_it_in_cleartext(asker):
    err = health.postgres_probe(asker.dsn(), 5)
    assert err is not None, "the probe connected to a server that asked for a cleartext password"
    assert asker.asked >= 1, "the fake server was never reached"
    assert not any(PASSWORD.encode() in r for r in asker.received), "the password went out in cleartext"
    assert not any(r.startswith(b"p") for r in asker.received), "a password message went out"


def test_a_worker_process_refuses_too_whatever_its_environment_asked(asker):
    code = ("import harness, psycopg, sys\n"
            "try:\n"
            "    psycopg.connect(sys.argv[1], connect_timeout=5).close()\n"
            "except psycopg.OperationalError as e:\n"
            "    print(e)\n")
    proc = subprocess.run([sys.executable, "-c", code, asker.dsn()], capture_output=True, text=True, timeout=60,
                          env={"PGREQUIREAUTH": "password", "PATH": "/usr/bin:/bin",
                               "PYTHONPATH": ":".join(sys.path)})
    assert proc.returncode == 0, proc.stderr
    assert asker.asked >= 1 and not any(PASSWORD.encode() in r for r in asker.received), proc.stdout
    assert "scram-sha-256" in proc.stdout, proc.stdout


def test_libpq_itself_would_have_sent_it(asker):
    """The fake server works: a plain libpq connection without the requirement sends the password."""
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(asker.dsn() + "?require_auth=password", connect_timeout=5).close()
    assert any(PASSWORD.encode() in r for r in asker.received)


def test_the_dsn_a_consumer_gets_requires_scram_and_keeps_the_rest():
    uri = libpq_uri("host=127.0.0.1 port=5432 user=harness_run_r1 password=p@ss dbname=harness")
    assert uri == "postgresql://harness_run_r1:p%40ss@127.0.0.1:5432/harness?require_auth=scram-sha-256"
    assert psycopg.conninfo.conninfo_to_dict(uri)["require_auth"] == "scram-sha-256"
