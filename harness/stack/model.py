"""What the rest of the harness knows about a stack: two addresses and some facts.

Experiments never care whether Kafka is a local process, a container or a
remote cluster; they get a `Stack` with a bootstrap address and a Postgres DSN.
`redact` (see redaction.py) removes the password from a DSN before it goes
into any report, log or error message.
"""

from dataclasses import dataclass, field, asdict

from .redaction import redact  # noqa: F401 - the name the rest of the harness imports


@dataclass
class Stack:
    kind: str                      # "local", "compose" or "external"
    bootstrap_servers: str
    postgres_dsn: str              # with password: never print it, use `redact`
    owned: bool                    # True when the harness started these services
    kafka_version: str | None = None
    brokers: int = 1               # Kafka nodes the harness started (local or compose); 1 for an external cluster
    postgres_version: str | None = None
    pids: dict = field(default_factory=dict)
    healthy: bool | None = None
    notes: list = field(default_factory=list)

    def public(self) -> dict:
        d = asdict(self)
        d["postgres_dsn"] = redact(self.postgres_dsn)
        return d
