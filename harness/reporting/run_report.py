"""RunReport: the one object every rendering (JSON, Markdown, HTML, terminal) reads.

`report.json` follows docs/report.schema.json (schema_version 4; built in
reporting/build.py); other tools rely on its field names. Derived views (the
scoreboard rows) are computed here once, so no two renderings can disagree.
A number the harness could not measure is None and shows as "unknown".
Writing the report folder (report.json, .md, .html) is writer.py's job.
"""

import json
from dataclasses import dataclass
from pathlib import Path

from .shared import CRASH_FAULTS, fmt  # noqa: F401 - CRASH_FAULTS re-exported
# Re-exported for runner.py only (its home is writer.py, which does not import this module).

SCHEMA_VERSION = 4   # docs/report.schema.json

VERDICTS = ("as-predicted", "unexpected", "audit-failed", "incomplete", "interrupted")


@dataclass
class RunReport:
    data: dict

    # -- persistence ------------------------------------------------------------------------
    @classmethod
    def load(cls, path: Path) -> "RunReport":
        """A report.json (or a run folder's), validated first (reporting/validate.py): a file that is not
        a schema-valid report ends in one HarnessError, never in a renderer."""
        from .validate import read_report
        p = Path(path)
        if p.is_dir():
            p = p / "report.json"
        return cls(read_report(p)[0])

    def to_json(self) -> str:
        return json.dumps(self.data, indent=2, sort_keys=False) + "\n"

    # -- derived views ------------------------------------------------------------------------
    @property
    def experiment(self) -> str:
        return self.data["experiment"]

    @property
    def verdict(self) -> str:
        return self.data["verdict"]

    def parameter_rows(self) -> list[tuple[str, str]]:
        """The run's parameters as a person reads them: only options that were in force (an unset
        option, a switched-off flag, `--effect none`, `--assignment assign`, no padding are left out),
        named as on the command line, with no Python spellings (None, True, [...])."""
        rows = []
        for k, v in (self.data.get("params") or {}).items():
            if v is None or v is False or v == [] or v == "" or (k == "effect" and v == "none") \
                    or (k == "assignment" and v == "assign") \
                    or (k == "payload_bytes" and v == 0):
                continue
            if v is True:
                v = "yes"
            elif isinstance(v, list):
                v = ", ".join(map(str, v))
            elif isinstance(v, float) and v.is_integer():
                v = int(v)
            rows.append((k.replace("_", "-"), v if isinstance(v, str) else fmt(v)))
        return rows

    def client_rows(self) -> list[tuple[str, str]]:
        """How the workers' clients ran, for the "Stack and environment" table: the JVM of a Kafka Streams
        run, the consumer (or Kafka Streams) group protocol asked for, and the transaction protocol a Java transactional client was
        seen to speak (with its evidence)."""
        rows = []
        jvm = self.data.get("streams_jvm")
        if jvm:
            rows.append(("Kafka Streams workers' JVM", f"{jvm.get('release') or 'java'} ({jvm.get('java')}), "
                         f"class cache {jvm.get('cache') or 'none'} (--streams-jvm {jvm.get('asked')})"))
        params = self.data.get("params") or {}
        if params.get("group_protocol"):
            how = ("members of the run's group" if params.get("assignment") == "group" else
                   "fixed partitions, never subscribed: the broker's group is a simple one either way")
            rows.append(("consumer group protocol of the workers",
                         f"group.protocol={params['group_protocol']} (--group-protocol); {how}"))
        share = self.data.get("share_consumer")
        if share:
            rows.append(("share consumer of the workers", f"{share.get('library')} {share.get('version') or 'unknown'}"
                         f" ({share.get('status')}; --client {share.get('client')})"))
        if params.get("streams_protocol"):
            how = ("a streams group (KIP-1071), tasks assigned by the broker; dynamic members: a halted worker's "
                   "tasks wait for the broker's group.streams.session.timeout.ms"
                   if params["streams_protocol"] == "streams" else
                   "a consumer group; static members (group.instance.id per worker, 6 s session)")
            rows.append(("Kafka Streams group protocol of the workers",
                         f"group.protocol={params['streams_protocol']} (--streams-protocol); {how}"))
        tp = self.data.get("transaction_protocol")
        if tp:
            said = {"2": "transaction version 2 (KIP-890): a new producer epoch at every transaction's end",
                    "before 2": "before transaction version 2: the producer epoch changes only when a worker "
                                "starts", "mixed": "partly version 2 (some transactions ended with a new epoch)",
                    "unknown": "unknown (the client's log showed no committed transaction's epochs)"}.get(tp.get("version_seen"), "unknown")
            rows.append(("transaction protocol of the Java client", f"{said}; {fmt(tp.get('commits_epoch_bumped'))} of "
                         f"{fmt(tp.get('commits_with_epoch_known'))} committed transactions ended with a new epoch "
                         f"(the client's log)"))
        return rows

    SCOREBOARD_COLUMNS = ("metric", "counted in", "observed", "predicted")

    def scoreboard(self) -> list[tuple[str, str, str, str]]:
        """(metric, counted in, observed, predicted) rows, formatted, shared by Markdown, HTML and terminal
        (scoreboard.py)."""
        from .scoreboard import rows
        return rows(self.data)

    def legend(self) -> list[tuple[str, str]]:
        """(count, one-line definition) of every count the scoreboard shows (legend.py)."""
        from .scoreboard import legend
        return legend(self.scoreboard())

    BALANCE_COLUMNS = ("account", "expected", "predicted", "actual", "actual - expected", "version",
                       "0-row updates")

    def balance_rows(self) -> list[tuple]:
        """One row per account (experiments with balances), shared by Markdown and HTML; empty otherwise."""
        bal = self.data.get("accounts") or {}
        out = []
        for a in bal.get("accounts") or []:
            pred = "" if a.get("predicted") is None else \
                ("<= " if a.get("predicted_op") == "<=" else "") + fmt(a["predicted"])
            diff = None if a["actual"] is None else a["actual"] - a["expected"]
            out.append((a["account"], fmt(a["expected"]), pred, fmt(a["actual"]),
                        "unknown" if diff is None else f"{diff:+,}", fmt(a.get("version")), fmt(a.get("stale_updates"))))
        return out

    ANOMALY_COLUMNS = ("class", "allowed here", "count", "meaning", "first witnesses")

    def anomaly_class_rows(self) -> list[tuple]:
        """Jepsen's anomaly classes the run checked, one row each, shared by Markdown and HTML; empty when the
        run kept no history. A class it could not check shows "unknown" and why."""
        section = self.data.get("anomaly_classes") or {}
        out = []
        from .stop_excuse import stop_excuses
        excuses = stop_excuses(self.data)
        ours = sum(e["excused"] for e in excuses)
        for name, c in (section.get("classes") or {}).items():
            shown = "; ".join(_witness_text(w) for w in (c.get("witnesses") or [])[:3])
            stop = name == "hanging-transaction" and excuses
            if stop:        # each partition, the stop's or not, and the evidence that says so
                shown = "; ".join(f"partition {e['partition']} offset {e['offset']}: "
                                  f"{'the stop' if e['excused'] else 'not the stop'}'s, {e['why']}"
                                  for e in excuses[:3])
            out.append((name, "the harness's stop (not an anomaly)" if stop and ours == c.get("count") else
                        "allowed" if c.get("allowed") else
                        f"forbidden ({ours} of them the harness's stop)" if stop and ours else "forbidden",
                        fmt(c.get("count")), c.get("meaning") or "",
                        shown or (f"not checked: {c['unchecked']}" if c.get("unchecked") else "")))
        return out

    def history_line(self) -> str:
        """What the histories held, in one line ("" when the run kept none)."""
        h = (self.data.get("anomaly_classes") or {}).get("history") or {}
        if not h:
            return ""
        text = (f"counted in the Kafka topics (the workers' histories and the readers of the output topic), not in "
                f"the database: {fmt(h.get('operations'))} operations of {fmt(h.get('processes'))} worker processes")
        if h.get("bad_lines"):
            text += f"; {fmt(h['bad_lines'])} malformed lines set aside"
        if h.get("problems"):
            text += f"; unreadable: {'; '.join(map(str, h['problems'][:3]))}"
        oc = h.get("outcomes") or {}
        unknown = [f"{fmt(n)} {what}" for what, n in (("sends", (oc.get("sends") or {}).get("unknown")),
                                                      ("transactions", (oc.get("transactions") or {}).get("unknown")),
                                                      ("offset commits", (oc.get("commits") or {}).get("unknown")))
                   if n]
        if unknown:
            text += f"; unknown to their writers (may or may not have happened): {' and '.join(unknown)}"
        seen = (self.data.get("kafka_output") or {}).get("reader_during_run")
        if isinstance(seen, dict) and seen:
            n = sum(r.get("records") for r in seen.values() if isinstance(r, dict) and type(r.get("records")) is int)
            text += f"; the read_committed reader during the run saw {fmt(n)} records of {fmt(len(seen))} partitions"
        return text

    def summary(self) -> str:
        return self.data.get("summary", "")

    def summary_detail(self) -> list[str]:
        """What the summary sentence leaves out, one item a fact ([] for reports written before it)."""
        return [str(x) for x in self.data.get("summary_detail") or []]


def _witness_text(w: dict) -> str:
    """One witness of an anomaly class in a few words: what, where, who."""
    if not isinstance(w, dict):
        return str(w)
    what = f"{w['id']} " if w.get("id") is not None else ""
    skipped, at = w.get("skipped_offsets"), w.get("at")
    if isinstance(skipped, list) and skipped:
        where = f"partition {w.get('partition')} offsets {skipped[0]}..{skipped[-1]}"
    elif isinstance(at, list):
        where = "at " + ", ".join(f"{x[0]}/{x[1]}" if isinstance(x, list) and len(x) == 2 else str(x) for x in at[:4])
    elif "got" in w:
        where = f"partition {w.get('partition')}: offset {w['got']} after {w.get('expected')}"
    else:
        where = f"partition {w.get('partition')} offset {w.get('offset')}"
    who = w.get("writer") or w.get("consumer") or w.get("reader")
    return what + where + (f" ({who})" if who else "")
