"""The Kafka user of `harness env`'s shell: it may look at every topic and group, and change nothing.

Before, `harness env` handed the shell the harness's own client settings: the super user `harness`,
with which a typo in a `kcat -P` could write into a running run's input topic. On the harness's own
SCRAM stack the shell gets a user of its own, `harness_shell`, allowed only:

- READ and DESCRIBE on every topic (`kcat -C`, `kcat -L`, offsets);
- DESCRIBE on every group (its members and committed offsets), and READ only on groups whose name
  starts with `harness-shell-` (`kcat -G harness-shell-me ...`): READ on a run's group would let the
  shell commit offsets there and falsify that run.

No WRITE, CREATE, DELETE or ALTER anywhere. Its password is random and lives only in
`<state>/shell-client.properties` (0600), the file HARNESS_KAFKA_CONFIG_FILE names (for `kcat -F`).
The user is made (or its ACLs and password set again) by each `harness env`; `harness down --purge`
deletes it with the stack's data. The harness's own commands in that shell do not take that file as
the user's settings (`is_shell_file`): they keep logging in as `harness`.
"""

from pathlib import Path

from ..clients import kafka_client
from ..workload import kafka_users
from ..workload.kafka_users import Allow
from .kafka_auth import checked, write_private

USER = "harness_shell"
FILE = "shell-client.properties"
GROUP_PREFIX = "harness-shell-"
ALLOWS = [Allow("TOPIC", "*", "READ"), Allow("TOPIC", "*", "DESCRIBE"), Allow("GROUP", "*", "DESCRIBE"),
          Allow("GROUP", GROUP_PREFIX, "READ", prefixed=True)]


def file_of(state: Path) -> Path:
    return state / FILE


def is_shell_file(path, state: Path) -> bool:
    """Is `path` this state folder's shell settings file (as `harness env` exports it)?"""
    try:
        return Path(path).resolve() == file_of(state).resolve()
    except OSError:
        return False


def _password(state: Path) -> str:
    f = file_of(state)
    if f.exists():
        pw = kafka_client.load_file(f).get("sasl.password")
        if pw:
            return checked(pw, f)
    return kafka_users.new_password()


def ensure(stack, state: Path) -> Path:
    """Make the shell's user on `stack` (ACLs, then its credential) and write its settings file; its path."""
    password = _password(state)
    settings = kafka_users.login(kafka_client.settings_for(stack.bootstrap_servers), USER, password)
    kafka_users.make(stack.bootstrap_servers, USER, password, ALLOWS)
    f = file_of(state)
    write_private(f, "# Kafka client settings of `harness env`'s shell: read and describe only (librdkafka names).\n"
                  + "".join(f"{k}={v}\n" for k, v in settings.items()))
    return f
