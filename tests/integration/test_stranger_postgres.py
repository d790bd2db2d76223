"""Issue 53 case 9, re-made with another local user: when PostgreSQL's port is taken by a program of a user
the test makes (a stranger's fake server asking for the password in cleartext), the harness's connection
sends it no password: libpq is told to require SCRAM (harness/clients/pgconn.py, `PGREQUIREAUTH`).

The stranger's program runs with the system's python3 only, prints one line per connection it asked, and one
line with whatever came back after its request (a password message starts with `p`)."""

import json
import subprocess

import psycopg
import pytest

from harness.clients import pgconn

pytestmark = pytest.mark.integration

ASKER = r'''
import json, socket, struct, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
print(json.dumps({"port": s.getsockname()[1]}), flush=True)
s.settimeout(60)
while True:
    try:
        c, _ = s.accept()
    except OSError:
        break
    c.settimeout(10)
    got = b""
    try:
        while True:
            n, code = struct.unpack("!ii", c.recv(8, socket.MSG_WAITALL))
            c.recv(n - 8, socket.MSG_WAITALL) if n > 8 else b""
            if n == 8 and code in (80877103, 80877104):
                c.sendall(b"N"); continue
            break
        c.sendall(b"R" + struct.pack("!ii", 8, 3))      # AuthenticationCleartextPassword
        while True:
            chunk = c.recv(4096)
            if not chunk:
                break
            got += chunk
    except (OSError, struct.error):
        pass
    c.close()
    print(json.dumps({"asked": True, "reply": got[:1].decode(errors="replace")}), flush=True)
'''


def test_a_strangers_program_on_postgresqls_port_gets_no_password(local_user):
    stranger = subprocess.Popen(["runuser", "-u", local_user, "--", "/usr/bin/python3", "-c", ASKER],
                                stdout=subprocess.PIPE, text=True, cwd="/")
    try:
        port = json.loads(stranger.stdout.readline())["port"]
        dsn = f"postgresql://harness:not-for-strangers@127.0.0.1:{port}/harness"
        with pytest.raises(psycopg.OperationalError) as refused:
            pgconn.connect(dsn, connect_timeout=10).close()
        assert "scram-sha-256" in str(refused.value), refused.value
        harness_side = json.loads(stranger.stdout.readline())
        # The control: libpq without the requirement does send it, to the same program.
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(dsn + "?require_auth=password", connect_timeout=10).close()
        control = json.loads(stranger.stdout.readline())
    finally:
        stranger.terminate()
        stranger.communicate(timeout=30)
    assert harness_side == {"asked": True, "reply": ""}, f"something reached the stranger: {harness_side}"
    assert control == {"asked": True, "reply": "p"}, control
