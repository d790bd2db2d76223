"""What the rest of the harness knows about a stack: two addresses and some facts.

Experiments never care whether Kafka is a local process, a container or a
remote cluster; they get a `Stack` with a bootstrap address and a Postgres DSN.
`redact` (see redaction.py) removes the password from a DSN before it goes
into any report, log or error message. `kafka_config` holds the Kafka client
settings of the stack (credentials included: see harness.clients.kafka_client), which
`public()` shows with their secrets masked. `audit_dsn`, when the harness
made the database, is its read-only role's: SQL the harness did not write
(`--audit-sql`) runs there (see harness.checker.user_sql); `public()` leaves it out. `roles_dsn`, when the
harness made the database, is the connection that makes and drops each run's
own role (workload.run_role); "" means the DSN's own role tries; `public()`
leaves it out too.
"""

from dataclasses import dataclass, field, asdict

from ..core.redaction import redact  # noqa: F401 - the name the rest of the harness imports


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
    kafka_config: dict = field(default_factory=dict, repr=False)   # may hold secrets: see public()
    audit_dsn: str = field(default="", repr=False)   # the read-only role's DSN, with password; "" when none
    roles_dsn: str = field(default="", repr=False)   # makes and drops run roles, with password; "": postgres_dsn

    @property
    def role_maker_dsn(self) -> str:
        return self.roles_dsn or self.postgres_dsn

    @property
    def kafka_auth(self) -> str:
        """How clients authenticate, e.g. `SASL_PLAINTEXT SCRAM-SHA-512 as harness`, or `PLAINTEXT`."""
        from ..clients.kafka_client import describe
        return describe(self.kafka_config)

    def public(self) -> dict:
        from ..clients.kafka_client import public
        d = asdict(self)
        d["postgres_dsn"] = redact(self.postgres_dsn)
        d.pop("audit_dsn", None)
        d.pop("roles_dsn", None)
        d["kafka_config"] = public(self.kafka_config)
        d["kafka_auth"] = self.kafka_auth
        return d
