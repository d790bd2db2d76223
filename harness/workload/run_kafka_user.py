"""A Kafka user of one run: its consumers may read its input, write its output, use its group, nothing else.

On the harness's own SCRAM stack the harness is the super user `harness`. A consumer under test that
logged in as it could write into another run's input topic (and turn a correct consumer's run
`unexpected`), commit another run's group, or delete its topics. So at the start of each run the harness
makes a SCRAM user for it (kafka_users.py), named after the run id like its PostgreSQL role
(`harness_run_<slug>`), with a random password, and allows it only:

- READ and DESCRIBE on the run's input topic; WRITE and DESCRIBE on its output topic; READ, WRITE and
  DESCRIBE on its events topic (the outbox's relay writes it, its downstream consumer reads it);
- READ on its groups (the group, the downstream group, the share group): join, commit, fetch offsets;
- WRITE and DESCRIBE on transactional ids starting with `harness-<run id>-` (each slot's, and Kafka
  Streams' own, which start with its application id, the run's group), and IDEMPOTENT_WRITE on the
  cluster (idempotent producers on brokers that still ask for it);
- everything on topics starting with `harness-<run id>-`: Kafka Streams creates, reads, writes and trims
  its internal topics (changelogs, repartition topics), named after its application id.

Every process of the run logs in as that user: our Python workers, the Java and Kafka Streams workers and
a custom consumer (HARNESS_KAFKA_CONFIG), through their environment, never argv. The harness itself
(topics, production, progress, audit) stays the super user. When the workers are gone, also after an
error or Ctrl-C (`let_go`), the user's ACLs go and the user is retired (kafka_users.retire: its password
overwritten with one nobody holds, never deleted); `harness clean` does the same for dead runs' users.

On a stack where the harness cannot make users (an external cluster, a plaintext stack: `--auth none`)
the run's consumers get the stack's own settings, as before, and the report says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..clients import kafka_client
from ..core.errors import HarnessError
from . import kafka_users
from .kafka_users import Allow
from .naming import PG_IDENTIFIER_MAX, RunNames, slug

PREFIX = "harness_run_"
GIVEN_UP = ("this run's consumers log in to Kafka with the stack's own settings: on a plaintext stack any "
            "client may write into any topic, another run's input included")


def user_name(run_id: str) -> str:
    """`harness_run_<slug of the run id>`, as the run's PostgreSQL role (workload.run_role)."""
    return PREFIX + slug(run_id, PG_IDENTIFIER_MAX - len(PREFIX))


def allows(names: RunNames) -> list[Allow]:
    """Every ACL a run's user gets: its own topics, groups and transactional ids, nothing else."""
    own = names.own_prefix
    return [Allow("TOPIC", names.input_topic, "READ"), Allow("TOPIC", names.input_topic, "DESCRIBE"),
            Allow("TOPIC", names.output_topic, "WRITE"), Allow("TOPIC", names.output_topic, "DESCRIBE"),
            *(Allow("TOPIC", names.events_topic, op) for op in ("READ", "WRITE", "DESCRIBE")),
            Allow("GROUP", names.group, "READ"), Allow("GROUP", names.downstream_group, "READ"),
            Allow("GROUP", names.share_group, "READ"),
            Allow("TRANSACTIONAL_ID", own, "WRITE", prefixed=True),
            Allow("TRANSACTIONAL_ID", own, "DESCRIBE", prefixed=True),
            Allow("TOPIC", own, "ALL", prefixed=True),
            Allow("BROKER", "kafka-cluster", "IDEMPOTENT_WRITE")]


@dataclass
class KafkaGrant:
    """What a run's consumers log in with, and the line the report shows (never the password)."""
    user: str | None                     # None: the stack's own settings (the fallback)
    said: str
    settings: dict = field(default_factory=dict, repr=False)     # with the password: environment only
    removed: bool = False


def can_make_users(stack) -> bool:
    """Users are made on a SCRAM stack the harness started (its `harness` user is a super user there)."""
    return bool(stack.owned and kafka_users.is_scram(stack.kafka_config))


def create(stack, run_id: str) -> KafkaGrant:
    """Make the run's user with its ACLs; the fallback grant where users cannot be made. HarnessError when
    the stack should make one and could not (the run must not go on with the super user's login)."""
    base = kafka_client.settings_for(stack.bootstrap_servers)
    if not can_make_users(stack):
        who = kafka_client.describe(base)
        return KafkaGrant(None, f"{who} (no user of its own: the harness makes users only on its own SCRAM stack; "
                                f"{GIVEN_UP})", base)
    user, password = user_name(run_id), kafka_users.new_password()
    names = RunNames(run_id)
    try:        # a user an earlier, killed attempt of this run id left gets the new password (an upsert)
        kafka_users.make(stack.bootstrap_servers, user, password, allows(names), probe_topic=names.input_topic)
    except BaseException:      # an error, and also Ctrl-C or SIGTERM while it was being made: nothing stays usable
        _retire_quietly(stack, user)
        raise
    return KafkaGrant(user, f"{user} (made for this run: only its own topics, group and transactional ids; "
                            f"retired when the run ends)", kafka_users.login(base, user, password))


def _retire_quietly(stack, user: str) -> str | None:
    try:
        kafka_users.retire(stack.bootstrap_servers, user)
    except Exception as e:  # noqa: BLE001 - said by the caller; `harness clean` removes it later
        return type(e).__name__
    return None


def give(run) -> None:
    """The run's own Kafka user: its workers log in as it (`run.kafka_login`)."""
    run.kafka_user = create(run.stack, run.names.run_id)
    run.kafka_login = run.kafka_user.settings
    if run.kafka_user.user is None and not run.stack.owned:
        return          # an external cluster: the user's own settings, as always
    if run.kafka_user.user is None:
        run.log(f"[{run.names.run_id}] warning: Kafka login {run.kafka_user.said}")


def let_go(run) -> None:
    """The run's user loses its ACLs and is retired (its topics stay, for the audit); never raises."""
    grant = getattr(run, "kafka_user", None)
    if grant is None or grant.user is None or grant.removed:
        return
    failed = _retire_quietly(run.stack, grant.user)
    if failed:
        run.log(f"[{run.names.run_id}] the run's Kafka user {grant.user} was not retired ({failed}); "
                f"`harness clean {run.names.run_id}` retires it")
        grant.said = (f"{grant.user} (made for this run: only its own topics, group and transactional ids; NOT "
                      f"retired at the end ({failed}): `harness clean {run.names.run_id}` retires it)")
    grant.removed = True


def run_users(stack) -> list[str]:
    """Every run user on the stack that can still log in (names only), live runs' too; retired ones are left
    out; [] where the harness makes none."""
    if not can_make_users(stack):
        return []
    return [u for u in kafka_users.users(stack.bootstrap_servers) if u.startswith(PREFIX)]


def run_of(stack, user: str) -> str | None:
    """The run id `user` was made for, when the harness made it: its ACL on its run's own prefix
    (`harness-<run id>-`, which only the super user could grant) names a run whose user name it has. None for
    a user that is merely named like one (another admin's `harness_run_x`), or one whose ACLs are gone (a
    retired one is left out of run_users before this is asked)."""
    for name in kafka_users.prefixed_topic_acls(stack.bootstrap_servers, user):
        if name.startswith("harness-") and name.endswith("-"):
            run_id = name[len("harness-"):-1]
            if user_name(run_id) == user:
                return run_id
    return None


def retire_users(stack, users) -> None:
    """Take these run users' ACLs away and retire them (`harness clean`); nothing where the harness makes none."""
    if not can_make_users(stack):
        return
    for u in sorted(set(users)):
        kafka_users.retire(stack.bootstrap_servers, u)
