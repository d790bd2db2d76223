"""A matrix's columns: a release, and what its workers speak besides (client, group protocols).

`harness matrix` compares the same experiments side by side. A column is a
release with the workers' Kafka client (`--client python,java`), their
consumer group protocol (`--group-protocol classic,consumer`, KIP-848) and
Kafka Streams' group protocol (`--streams-protocol classic,streams`,
KIP-1071). The first value of each (python, classic, classic) is what every
experiment runs by default, so the column of all three runs the whole suite;
any other column runs only the chosen experiments that take each of its
other values (the eos family for java, those declaring --group-protocol for
consumer, eos-streams for streams), and a column none of them takes does not
exist (eos-streams takes no --client: there is no `java streams` column).
A release whose brokers lack a protocol (consumer groups before Kafka 4.0,
streams groups before 4.2) gets no column of it either, and the matrix says
so. Kept apart from matrix_runner.py, which starts the suites, so the naming
and the choice of columns can be read (and tested) alone.
"""

from __future__ import annotations

from itertools import product

from ..core.errors import HarnessError

CLIENTS = ("python", "java")
PROTOCOLS = ("classic", "consumer")
STREAMS_PROTOCOLS = ("classic", "streams")
# From which release a cluster the harness formats offers the protocol: KIP-848's consumer groups are GA on
# Kafka 4.0 brokers (group.version 1); KIP-1071's streams groups from 4.2 (streams.version 1 finalized at format).
PROTOCOL_FROM = {"consumer": (4, 0), "streams": (4, 2)}
CONSUMER_PROTOCOL_FROM = PROTOCOL_FROM["consumer"]
STREAMS_PROTOCOL_FROM = PROTOCOL_FROM["streams"]


def _columns(spec: str | None, allowed: tuple, flag: str, what: str) -> list[str]:
    """A comma-separated list of `allowed` values, each once (the first of `allowed` when not given)."""
    chosen = [c.strip() for c in (spec or allowed[0]).split(",") if c.strip()]
    if not chosen or any(c not in allowed for c in chosen):
        raise HarnessError(f"{flag} takes {', '.join(allowed[:-1])}, {allowed[-1]} or both (comma-separated), "
                           f"got {spec!r}")
    if len(set(chosen)) != len(chosen):
        raise HarnessError(f"{flag} names a {what} twice")
    return chosen


def parse_clients(spec: str | None) -> list[str]:
    """--client python,java: the eos family's transactional clients, each a column of its own per release
    (python, the default, runs the whole suite; java only the experiments that take --client)."""
    return _columns(spec, CLIENTS, "--client", "client")


def parse_protocols(spec: str | None) -> list[str]:
    """--group-protocol classic,consumer: each a column of its own per release and client (classic, the
    clients' default, runs the whole suite; consumer only the experiments that take --group-protocol)."""
    return _columns(spec, PROTOCOLS, "--group-protocol", "protocol")


def parse_streams_protocols(spec: str | None) -> list[str]:
    """--streams-protocol classic,streams: Kafka Streams' group protocol, a column of its own per release
    (classic, Kafka Streams' default, runs the whole suite; streams only eos-streams)."""
    return _columns(spec, STREAMS_PROTOCOLS, "--streams-protocol", "protocol")


def _takers(names: list[str], option) -> list[str]:
    from ..experiments import REGISTRY
    return [n for n in names if n in REGISTRY and option in REGISTRY[n].options]


def client_experiments(names: list[str]) -> list[str]:
    """Of these experiments, those whose workers can be another client (they declare --client)."""
    from ..experiments.common_options import CLIENT
    return _takers(names, CLIENT)


def protocol_experiments(names: list[str]) -> list[str]:
    """Of these experiments, those whose workers' group protocol can be chosen (they declare --group-protocol)."""
    from ..experiments.common_options import GROUP_PROTOCOL
    return _takers(names, GROUP_PROTOCOL)


def streams_protocol_experiments(names: list[str]) -> list[str]:
    """Of these experiments, those whose Kafka Streams group protocol can be chosen (--streams-protocol)."""
    from ..experiments.kafka_streams import STREAMS_PROTOCOL
    return _takers(names, STREAMS_PROTOCOL)


def has_protocol(release: str, protocol: str) -> bool:
    """Whether a release's brokers offer this group protocol (classic: all)."""
    return protocol not in PROTOCOL_FROM or tuple(int(x) for x in release.split(".")[:2]) >= PROTOCOL_FROM[protocol]


def variant(client: str = "python", protocol: str = "classic", streams: str = "classic") -> str:
    """What a column runs besides its release: "" (Python, classic groups), "java", "consumer", "java consumer",
    "streams" (Kafka Streams' streams groups)."""
    return " ".join(w for w in (client if client != "python" else "", protocol if protocol != "classic" else "",
                                "streams" if streams != "classic" else "") if w)


def column_key(release: str, client: str = "python", protocol: str = "classic", streams: str = "classic") -> str:
    """A column of the matrix: a release, with the Python workers, or `<release> java`, `<release> consumer`,
    `<release> streams`..."""
    return " ".join(w for w in (release, variant(client, protocol, streams)) if w)


def folder_of(release: str, client: str = "python", protocol: str = "classic", streams: str = "classic") -> str:
    """A column's suite folder in the matrix folder: <release>/, <release>-java/, <release>-streams/..."""
    return column_key(release, client, protocol, streams).replace(" ", "-")


def split(key: str) -> tuple[str, str, str, str]:
    """(release, client, group protocol, Kafka Streams group protocol) of a column_key."""
    release, *rest = key.split(" ")
    return (release, "java" if "java" in rest else "python", "consumer" if "consumer" in rest else "classic",
            "streams" if "streams" in rest else "classic")


# Each dimension: its flag, its default value (the whole suite runs on it) and who takes its other values.
DIMENSIONS = (("--client", "python", client_experiments), ("--group-protocol", "classic", protocol_experiments),
              ("--streams-protocol", "classic", streams_protocol_experiments))


def column_experiments(chosen: list[str], combo: tuple[str, str, str]) -> list[str] | None:
    """The experiments a (client, group protocol, streams protocol) column runs: None for the default one
    (the whole suite, as chosen), else the chosen ones that take each of its values other than a default."""
    if all(value == default for value, (_, default, _) in zip(combo, DIMENSIONS)):
        return None
    names = list(chosen)
    for value, (_, default, takers) in zip(combo, DIMENSIONS):
        if value != default:
            keep = set(takers(names))
            names = [n for n in names if n in keep]
    return names


def variant_args(chosen: list[str], dims: tuple[list, list, list], common: list[str],
                 at_once: list[str]) -> dict[str, list[str]]:
    """The suite arguments of each column other than the default one, by its `variant`: its experiments and
    its values. A column none of the chosen experiments can run is left out; a value asked for that no
    column runs is refused in one line (e.g. --streams-protocol streams with --client java alone)."""
    out = {}
    for combo in product(*dims):
        names = column_experiments(chosen, combo)
        if not names:
            continue
        values = [x for value, (flag, default, _) in zip(combo, DIMENSIONS) if value != default
                  for x in (flag, value)]
        out[variant(*combo)] = [*common, "--experiments", ",".join(names), *values, *at_once]
    for i, (values, (flag, default, takers)) in enumerate(zip(dims, DIMENSIONS)):
        for value in values:
            if value != default and not any(value in v.split(" ") for v in out):
                who = ", ".join(takers(chosen)) or "none of the chosen experiments"
                add = " and ".join(f"{d} to {f}" for j, (f, d, them) in enumerate(DIMENSIONS)
                                   if j != i and d not in dims[j] and not them(takers(chosen)))
                verb = "takes" if "," not in who else "take"
                raise HarnessError(f"{flag} {value}: no column of this matrix runs it ({who} {verb} it, but not "
                                   f"the other values given" + (f"; add {add}" if add else "") + ")")
    return out


def plan(releases: list[str], dims: tuple, variants: dict) -> tuple[list[tuple], list[dict]]:
    """The columns, in order (release, client, protocol, streams), and those left out because the release's
    brokers lack a protocol: {key, why}. `variants`: which non-default columns have experiments to run."""
    columns, absent = [], []
    for release in releases:
        for combo in product(*dims):
            v = variant(*combo)
            if v and v not in variants:
                continue
            missing = [p for p in combo[1:] if not has_protocol(release, p)]
            if missing:
                since = ".".join(str(x) for x in PROTOCOL_FROM[missing[0]])
                absent.append({"key": column_key(release, *combo),
                               "why": f"Kafka {release} has no {missing[0]} group protocol (Kafka {since} or later)"})
                continue
            columns.append((release, *combo))
    return columns, absent
