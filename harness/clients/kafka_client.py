"""The config of every Kafka client the harness starts: the address plus the user's client settings.

A real cluster is rarely plaintext: it wants `security.protocol`,
`sasl.mechanism`, credentials, a CA file. The user gives them once, in
librdkafka's property names (the names kcat reads with `-F`), by
`--kafka-config KEY=VALUE`, `--kafka-config-file FILE` (Java
client.properties style) or `HARNESS_KAFKA_CONFIG_FILE`; a local stack started
with `harness up --auth scram` brings its own file. `use()` binds such settings
to a bootstrap address, and

    kafka_client.config(bootstrap, {"group.id": ...})

returns the full confluent_kafka config for that address. Every client is
built through it, so no call site writes `{"bootstrap.servers": ...}` itself
and none forgets the credentials. Call-site entries win over the user's
settings: an experiment's isolation level or transactional.id is part of what
it tests.

The settings reach the processes the harness starts (workers, runs of a
suite, the Kafka Streams JVM) through the environment variable `ENV`, never
their command lines, which `ps` shows to everyone. Secret values never appear
in output: `public()` masks them and `scrub()` removes them from a message. A
key is secret when it names one (password, secret, token, key, credential,
JAAS text) or is any `sasl.*` property but the mechanism and the user name,
erring on the side of hiding too much: a masked path costs nothing, a shown
credential everything.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from ..core.errors import HarnessError

ENV = "HARNESS_KAFKA_CLIENT_SETTINGS"        # JSON {bootstrap: {key: value}}, inherited by child processes
MASK = "***"
_SECRET_WORDS = ("password", "secret", "token", "key", "credential", "jaas")
_SECRET_KEYS = {"sasl.oauthbearer.config"}
# The sasl.* properties that name no secret: shown in status lines and reports (see `describe`).
_PUBLIC_SASL = {"sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.oauthbearer.method"}
# Set by the harness from the stack, never by the user.
_RESERVED = {"bootstrap.servers", "metadata.broker.list"}

_bound: dict[str, dict] = {}


def is_secret(key: str) -> bool:
    k = key.strip().lower()
    if k.startswith("sasl."):
        return k not in _PUBLIC_SASL
    return k in _SECRET_KEYS or any(w in k for w in _SECRET_WORDS)


def public(settings: dict) -> dict:
    """`settings` with every secret value replaced by `***`."""
    return {k: (MASK if is_secret(k) else v) for k, v in settings.items()}


def scrub(message: str, settings: dict | None) -> str:
    """`message` without any secret value of `settings` (longest first, so no piece of one survives)."""
    if not message or not settings:
        return message
    for v in sorted((str(v) for k, v in settings.items() if is_secret(k) and str(v)), key=len, reverse=True):
        message = message.replace(v, MASK)
    return message


# ---- reading the user's settings -------------------------------------------------------------

def parse_properties(text: str, source: str = "client settings") -> dict:
    """Java client.properties style: `key=value` (or `key: value`) lines, `#` and `!` comments.

    Values are taken as written after the separator, spaces around them trimmed; no line
    continuations or escapes (a secret with a backslash stays as it is).
    """
    out = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        m = re.match(r"([^=:\s]+)\s*[=:]\s*(.*)$", line)
        if not m:
            raise HarnessError(f"{source} line {n}: expected key=value, got {_shown_line(line)!r}")
        out[m[1]] = m[2].strip()
    return out


def _shown_line(line: str) -> str:
    """A bad line as it may be shown: cut short, and never a line that may hold a secret."""
    return "(a line that mentions a secret)" if is_secret(line) or "=" in line else line[:60]


def parse_pairs(pairs) -> dict:
    """`--kafka-config KEY=VALUE` options, in order (a later one wins)."""
    out = {}
    for p in pairs:
        key, sep, value = p.partition("=")
        key = key.strip()
        if not sep or not key:
            shown = "(hidden)" if is_secret(p) else p[:60]
            raise HarnessError(f"--kafka-config takes KEY=VALUE, got {shown!r}")
        out[key] = value
    return out


MAX_SETTINGS_FILE_BYTES = 1024 * 1024


def load_file(path) -> dict:
    """The settings of a client.properties file: a regular file of at most 1 MiB (a device such as /dev/zero,
    or a FIFO that would block forever, is refused in one line)."""
    from ..core.safefile import read_limited
    p = Path(path)
    try:
        text = read_limited(p, MAX_SETTINGS_FILE_BYTES, "the Kafka client settings file").decode()
    except UnicodeDecodeError:
        raise HarnessError(f"the Kafka client settings file {p} is not a text file (key=value lines)") from None
    return parse_properties(text, str(p))


def from_options(pairs=(), path=None) -> dict:
    """The settings the user gave: the file first, then KEY=VALUE pairs over it."""
    settings = load_file(path) if path else {}
    settings.update(parse_pairs(pairs))
    bad = sorted(k for k in settings if k in _RESERVED)
    if bad:
        raise HarnessError(f"client setting {bad[0]} is not taken from the client settings: give the address "
                           f"with --bootstrap-servers")
    return settings


# ---- the settings in use ----------------------------------------------------------------------

_requested: dict = {}


def request(settings: dict) -> None:
    """The user's settings for this command (from its options); `resolve` lays them over the stack's."""
    global _requested
    _requested = dict(settings)


def requested() -> dict:
    """The user's settings for this command (its --kafka-config and --kafka-config-file), as given."""
    return dict(_requested)


def inherited(bootstrap: str) -> dict:
    """Settings a parent harness process bound to `bootstrap` (through the environment)."""
    try:
        d = json.loads(os.environ.get(ENV) or "{}")
    except ValueError:
        return {}
    s = d.get(bootstrap) if isinstance(d, dict) else None
    return dict(s) if isinstance(s, dict) else {}


def resolve(bootstrap: str, stack_settings: dict | None = None) -> dict:
    """The settings for a stack at `bootstrap`: a parent's, the stack's own file (if any) over them, then the
    user's. A parent's settings reach a child run on a stack with a file of its own too (a suite's or hunt's
    --kafka-config socket.timeout.ms=2000 on the SCRAM stack), but never replace what that file says (its
    credentials are the stack's, a parent's may be older).

    Checks them (an unknown or invalid property is one clear error) and binds them with `use`.
    """
    settings = {**inherited(bootstrap), **(stack_settings or {}), **_requested}
    check(settings)
    use(bootstrap, settings)
    return settings


def _env_bindings() -> dict:
    """The bindings in this process's environment (ENV), {} when there are none or they are not JSON."""
    try:
        d = json.loads(os.environ.get(ENV) or "{}")
    except ValueError:
        return {}
    return d if isinstance(d, dict) else {}


def use(bootstrap: str, settings: dict) -> None:
    """Bind `settings` to `bootstrap` in this process and in every process it starts from now on."""
    _bound[bootstrap] = dict(settings)
    d = _env_bindings()
    d[bootstrap] = dict(settings)
    os.environ[ENV] = json.dumps(d)


def forget(bootstrap: str) -> None:
    """Undo `use(bootstrap, ...)`: in this process and in the processes it starts from now on."""
    _bound.pop(bootstrap, None)
    d = _env_bindings()
    if bootstrap in d:
        del d[bootstrap]
        os.environ[ENV] = json.dumps(d)


def settings_for(bootstrap: str) -> dict:
    """The user's client settings bound to `bootstrap` (possibly by a parent process), or {}."""
    if bootstrap in _bound:
        return dict(_bound[bootstrap])
    return inherited(bootstrap)


def config(bootstrap: str, extra: dict | None = None) -> dict:
    """THE config of a confluent_kafka client for the cluster at `bootstrap`.

    `{"bootstrap.servers": bootstrap, **client settings, **extra}`: pass the client's own entries
    (group.id, isolation.level, logger, ...) in `extra`; they win over the user's settings.
    """
    return {**settings_for(bootstrap), "bootstrap.servers": bootstrap, **(extra or {})}


# How long a new producer waits for its broker connections, in all, before it is handed out anyway.
CONNECT_S = 15.0


def _asks_for_a_producer_id(conf: dict) -> bool:
    return str(conf.get("enable.idempotence", "")).lower() in ("true", "1") or bool(conf.get("transactional.id"))


def connected_producer(bootstrap: str, extra: dict | None = None, topic: str | None = None,
                       connect_s: float = CONNECT_S, required: bool = False):
    """A Producer with `config(bootstrap, extra)` whose first broker connection is up (and which knows
    `topic`'s leaders, when given). An idempotent (or transactional) producer that finds no connection up
    asks for its producer id, or looks up its transaction coordinator, again only 500 ms later: its first
    acknowledgement came after 0.50-1.00 s, against 0.06 s when it was connected first (librdkafka 2.16,
    local broker, 4 producers each way).

    For such a producer one metadata answer is not enough: it may come through the bootstrap connection,
    which librdkafka drops as soon as that answer names the brokers, so the producer id is asked for while
    no connection is up (its eos trace: `RequestPID -> WaitTransport`, "No brokers available"). Every
    metadata answer runs its producer-id state machine again (rdkafka_metadata.c), and the next one comes
    from a broker by its id, so it asks at once. Measured by that trace, with one answer 2 of 12 producers
    were handed out still waiting on a quiet machine and 6 of 12 with both cores busy; with two, none of 36.
    The outbox relay (a new producer per restart) waited 0.5 s in 36 of 100 restarts, and in none with two
    answers (`harness run outbox` alone, one run each: its workers 27.6 -> 10.9 s).

    Both answers share `connect_s`. When the first does not come, a `required` connection raises the
    client's error; otherwise, or when only the second does not come, the producer is handed out as it is,
    and its own timeouts say what went wrong."""
    import time
    from confluent_kafka import KafkaException, Producer
    conf = config(bootstrap, extra)
    p = Producer(conf)
    deadline = time.monotonic() + connect_s
    try:
        p.list_topics(topic, timeout=connect_s)
    except KafkaException:
        if required:
            raise
        return p
    if _asks_for_a_producer_id(conf):
        try:
            p.list_topics(topic, timeout=max(0.1, deadline - time.monotonic()))
        except KafkaException:
            pass
    return p


def check(settings: dict) -> None:
    """Raise one clear HarnessError when librdkafka rejects a property name or value."""
    if not settings:
        return
    from confluent_kafka import KafkaException, Producer
    try:
        # A producer accepts the common and the producer properties; without an address it connects nowhere.
        Producer({**{k: v for k, v in settings.items() if k not in _RESERVED}, "log_level": 0})
    except KafkaException as e:
        raise HarnessError(f"Kafka client settings rejected: {scrub(_text(e), settings)}") from None
    except (TypeError, ValueError) as e:
        raise HarnessError(f"Kafka client settings rejected: {scrub(str(e), settings)}") from None


def _text(e) -> str:
    err = e.args[0] if e.args else None
    return err.str() if hasattr(err, "str") else str(e)


def describe(settings: dict) -> str:
    """One phrase for status lines and reports, e.g. `SASL_PLAINTEXT SCRAM-SHA-512 as harness`."""
    proto = settings.get("security.protocol", "PLAINTEXT")
    mech = settings.get("sasl.mechanism") or settings.get("sasl.mechanisms")
    user = settings.get("sasl.username")
    return " ".join([proto] + ([mech] if mech and "sasl" in proto.lower() else [])
                    + ([f"as {user}"] if user and "sasl" in proto.lower() else []))


AUTH_FAILED = "authentication failed"


def auth_error(err) -> str | None:
    """The message of a librdkafka error that no retry will fix (bad credentials, SSL trust), else None."""
    from confluent_kafka import KafkaError
    try:
        code = err.code()
    except AttributeError:
        return None
    if code in (KafkaError._AUTHENTICATION, getattr(KafkaError, "SASL_AUTHENTICATION_FAILED", None)):
        return err.str()
    if code == KafkaError._SSL:
        return err.str()
    return None


def refused(bootstrap: str, message: str) -> HarnessError:
    """The one-line error for a broker that refuses the client settings (no secret in it)."""
    settings = settings_for(bootstrap)
    hint = (" (check sasl.username, sasl.password and sasl.mechanism)" if "SASL" in message.upper()
            else " (check the ssl.* client settings)")
    return HarnessError(f"Kafka at {bootstrap} refused the client settings ({describe(settings)}): "
                        f"{scrub(message.splitlines()[0][:300], settings)}{hint}")
