"""suite.md and suite.html: the scoreboard of every experiment, side by side.

Built from suite.json alone (which copies each run's numbers), so a suite
folder can be re-rendered with `harness report DIR`, and the Markdown, HTML
and JSON never disagree. A suite.json may come from someone else: every value is
escaped (harness/core/escape.py), and a run's link is rendered only when it
is a relative path that stays inside the suite folder.
"""

import math
from pathlib import Path

from . import html as h
from .store_chart import suite_chart
from ..core.escape import href, md, md_code
from ..core.escape import html as escape
from .shared import fmt, is_number, plain
from ..core.suite_schedule import CGROUP, CPU_LINES, summary_line

COLUMNS = ("experiment", "sent", "deliveries", "effects", "duplicates", "lost", "ledger total",
           "output read_committed", "output read_uncommitted", "crashes", "verdict", "seconds")


def suite_title(summary: dict) -> str:
    """'Suite of the core group, 2026-12-07 (<id>)' ('of the core and eos groups' for `--group core,eos`): what
    ran and when, then the id."""
    group = summary.get("group")
    named = [g.strip() for g in group.split(",") if g.strip()] if isinstance(group, str) else []
    what = (f"Suite of the {' and '.join([', '.join(named[:-1]), named[-1]] if len(named) > 1 else named)} "
            f"group{'s' if len(named) > 1 else ''}" if named else "Suite")
    date = h.when(summary.get("suite_id"), ", ")
    return f"{what}{date} ({summary['suite_id']})"


# Under the scoreboard: which store the effects, duplicates and lost columns count.
STORES_NOTE = ("Effects, duplicates and lost count the Postgres ledger table; n/a for a run that writes no ledger "
               "(its output topic's counts are in the read_committed column).")


def counted_in_topic(r: dict) -> bool:
    """A run that writes no ledger (eos, zombie, producer): its counts are its output topic's as read_committed
    readers see them, which the suite shows in the output columns, not as ledger effects."""
    rc = (r.get("kafka_output") or {}).get("read_committed")
    return (bool(r.get("counts")) and isinstance(rc, dict) and r.get("verdict") != "audit-failed"
            and (r.get("ledger") or {}).get("actual_total") is None)


def store_cells(r: dict) -> tuple[str, str, str, str]:
    """(ledger duplicates, ledger lost, topic duplicates, topic lost) of a suite row, each from its own store:
    n/a where the run has no such store, unknown where it has one that was not measured (no report)."""
    c, rc = r.get("counts") or {}, (r.get("kafka_output") or {}).get("read_committed")
    if not c:
        return ("unknown",) * 4
    ledger = ("n/a", "n/a") if counted_in_topic(r) else (fmt(c.get("duplicates")), fmt(c.get("lost")))
    topic = (fmt(rc.get("duplicates")), fmt(rc.get("lost"))) if isinstance(rc, dict) else ("n/a", "n/a")
    return (*ledger, *topic)


def one_sentence(r: dict) -> str:
    """A run's summary without the experiment's name it starts with (the list names it already)."""
    text, head = str(r.get("summary") or ""), f"{r.get('experiment')}: "
    return text[len(head):] if text.startswith(head) else text


def rows(summary: dict) -> list[tuple]:
    out = []
    for r in summary["experiments"]:
        c, led, ko = r.get("counts") or {}, r.get("ledger") or {}, r.get("kafka_output") or {}
        rc, ru = ko.get("read_committed") if ko else None, ko.get("read_uncommitted") if ko else None
        ledger = (f"{fmt(led['actual_total'])} / {fmt(led['expected_total'])}"
                  if led.get("actual_total") is not None else "n/a")
        effects = ("n/a",) * 3 if counted_in_topic(r) else (fmt(c.get("effects")), fmt(c.get("duplicates")),
                                                             fmt(c.get("lost")))
        out.append((r["experiment"], fmt(c.get("sent")), fmt(c.get("deliveries")), *effects, ledger,
                    f"{fmt(rc['records'])} ({fmt(rc['duplicates'])} dup, {fmt(rc['lost'])} lost)" if rc else "n/a",
                    f"{fmt(ru['records'])} ({fmt(ru['duplicates'])} dup)" if ru else "n/a",
                    fmt(r.get("crashes")), r.get("verdict", ""), fmt(r.get("seconds"))))
    return out


PHASES = (("setup", "set-up"), ("produce", "produce"), ("prepare_workers", "prepare workers"),
          ("workers", "workers"), ("restart_waits", "of which restart waits"), ("audit", "audit"))


def time_rows(summary: dict) -> list[tuple]:
    """Where each run's time went (seconds per phase, as each run measured it), longest run first."""
    out = []
    runs = sorted(summary["experiments"], key=lambda r: -(r.get("seconds") or 0))
    for r in runs:
        ph = ((r.get("timings") or {}).get("phases")) or {}
        out.append((r["experiment"], fmt(r.get("seconds")), fmt(r.get("cpu_seconds")), *(fmt(ph.get(k)) for k, _ in PHASES),
                    fmt((r.get("timings") or {}).get("restart_median_seconds")), fmt(r.get("crashes"))))
    return out


TIME_COLUMNS = ("experiment", "total s", "CPU s", *(label for _, label in PHASES), "restart median s", "crashes")


def cpu_line(summary: dict) -> str:
    """How busy the machine was: the runs' CPU-seconds against its cores over the wall time ('' when no run's
    CPU was measured), then the cores' whole busy time (busy_line)."""
    cpu = [r.get("cpu_seconds") for r in summary["experiments"]]
    known = [c for c in cpu if is_number(c)]
    sched = summary.get("scheduling") if isinstance(summary.get("scheduling"), dict) else {}
    cores = sched.get("cores") if is_number(sched.get("cores")) and sched.get("cores") > 0 \
        else (summary.get("environment") or {}).get("cpus")     # the suite's cores, else the machine's (older)
    wall = summary["timings"]["wall_seconds"]
    runs = ""
    share = _ratio(100 * sum(known), cores * wall) if known and is_number(cores) and is_number(wall) else None
    if share is not None and cores > 0:
        part = "" if len(known) == len(cpu) else f" ({len(known)} of {len(cpu)} runs measured)"
        runs = (f"The runs used {fmt(round(sum(known), 1))} CPU-seconds{part}: "
                f"{share:.0f}% of {cores:g} cores over the wall time (CPU s: each run's "
                f"process and its workers; the brokers' and Postgres' CPU is not counted).")
    busy = busy_line(summary, sum(known) if known and len(known) == len(cpu) else None)
    return " ".join(x for x in (runs, busy) if x)


def busy_line(summary: dict, runs_cpu: float | None) -> str:
    """'... kept them busy ...' from suite.json's scheduling.busy, or '' when it was not measured. It never
    names more than was counted: the CPU lines count every process on the cores, a cgroup only its own."""
    sched = summary.get("scheduling") if isinstance(summary.get("scheduling"), dict) else {}
    busy, cores = sched.get("busy"), sched.get("cores")
    if not isinstance(busy, dict) or not is_number(cores) or cores <= 0:
        return ""
    used, over = busy.get("core_seconds"), busy.get("over_seconds")
    if not is_number(used) or not is_number(over) or over <= 0 or used < 0:
        return ""
    share, least = _ratio(100 * used, cores * over), _ratio(10 * used, cores)
    if share is None or least is None:
        return ""                       # numbers no measurement gives (a hand-made suite.json)
    if busy.get("source") == CGROUP:
        who = (f"The processes of the suite's cgroup (a quota of {cores:g} cores; a broker or PostgreSQL outside "
               f"it is not counted) used {used:.1f} core-seconds over {over:.1f} s")
    elif busy.get("source") == CPU_LINES:
        who = (f"Every process on the suite's {cores:g} cores (the runs', the broker's and PostgreSQL's where they "
               f"run here, anyone else's) kept them busy {used:.1f} core-seconds over {over:.1f} s")
    else:                               # a suite.json that does not say how it counted
        who = f"The suite's {cores:g} cores were busy {used:.1f} core-seconds over {over:.1f} s"
    rest = ""
    if runs_cpu is not None and used >= runs_cpu:
        rest = f": the runs {runs_cpu:.1f}, the rest {used - runs_cpu:.1f}"
    floor = math.floor(least) / 10
    return (f"{who} ({share:.0f}%){rest}. That much CPU work takes at least {floor:.1f} s on "
            f"{cores:g} cores (another schedule may need more or less CPU).")


def _ratio(a: float, b: float) -> float | None:
    """a / b, or None when b is not positive or the result is not a finite number."""
    if not b > 0:
        return None
    q = a / b
    return q if math.isfinite(q) else None


def render_md(summary: dict, recorded: dict | None = None) -> str:
    out = [f"# {md(suite_title(summary))}", "", f"> {md(summary['conclusion'])}", "",
           "| " + " | ".join(COLUMNS) + " |", "| " + " | ".join("---" for _ in COLUMNS) + " |"]
    out += [_row(row) for row in rows(summary)]
    if recorded:
        from .guesses import SUITE_COLUMNS, score_line, suite_board
        board = suite_board(recorded, {r["experiment"]: r for r in summary["experiments"]})
        out += ["", "## Your predictions", "", f"Recorded before the runs started ({md(plain(recorded.get('recorded_at')))}, "
                f"from {md_code(str(recorded.get('source')))}). {md(score_line(board))}", "",
                _row(SUITE_COLUMNS), "| --- | --- | ---: | ---: | --- |"] + [_row(b) for b in board]
    out += ["", md(STORES_NOTE), ""]
    for r in summary["experiments"]:
        if r.get("summary"):
            out.append(f"- **{md(r['experiment'])}**: {md(one_sentence(r))}")
        elif r.get("error"):
            out.append(f"- **{md(r['experiment'])}**: {md(r['verdict'])}: {md(r['error'])}")
    out += ["", "## Where the time went", "", "| " + " | ".join(TIME_COLUMNS) + " |",
            "| " + " | ".join("---" for _ in TIME_COLUMNS) + " |"]
    out += [_row(row) for row in time_rows(summary)]
    out += ["", "Seconds as each run measured them (its total includes starting the `harness run` process). "
            "A restart wait is a SIGKILL to the restarted worker's first record. " + md(cpu_line(summary))]
    env = summary.get("environment") or {}
    out += ["", f"Wall time: {summary['timings']['wall_seconds']:.0f} s; "
            f"{md(summary_line(summary.get('scheduling'), summary.get('parallel', 1)))} "
            f"(timings inside each run include that contention). "
            f"Arguments: {md_code(' '.join(map(str, summary.get('command_args', []))))}",
            "", "| environment | |", "| --- | --- |"] + [_row(row) for row in env.items()] + [""]
    return "\n".join(out)


def _row(cells) -> str:
    return "| " + " | ".join(md(plain(c)) for c in cells) + " |"


# Each heading of suite.html and the entry of docs/reading-a-report.md that explains it (a test checks both).
SECTION_ANCHORS = {"Lost and duplicated effects per experiment": "suite-chart", "Scoreboard": "suite-scoreboard",
                   "What each run says": "suite-runs", "Where the time went": "suite-time",
                   "Parameters and environment": "suite-parameters"}


def _head(title: str, folder: Path | None = None) -> str:
    return f"<h2>{escape(title)}</h2>" + h.doc_link(SECTION_ANCHORS[title], folder)


def render_html(summary: dict, folder: Path | None = None, recorded: dict | None = None) -> str:
    body = [f"<h1>{escape(suite_title(summary))}</h1>",
            f"<p id=conclusion class=summary>{escape(summary['conclusion'])}</p>",
            _head("Lost and duplicated effects per experiment", folder), suite_chart(summary["experiments"]),
            _head("Scoreboard", folder), "<div class=wide>", _table_with_links(summary, folder), "</div>",
            f"<p class=muted>{escape(STORES_NOTE)}</p>",
            _head("What each run says", folder) + "<ul>"]
    if recorded:
        from .guesses import SUITE_COLUMNS, score_line, suite_board
        board = suite_board(recorded, {r["experiment"]: r for r in summary["experiments"]})
        body[2:2] = ["<h2 id=predictions>Your predictions</h2>" + h.doc_link(h.SECTION_ANCHORS["Your predictions"], folder),
                     f"<p>Recorded before the runs started ({escape(plain(recorded.get('recorded_at')))}). "
                     f"{escape(score_line(board))}</p>", h.table(board, SUITE_COLUMNS, numeric=(2, 3))]
    for r in summary["experiments"]:
        text = one_sentence(r) or f"{r.get('verdict')}: {r.get('error', '')}"
        body.append(f"<li><b>{escape(r['experiment'])}</b>: {escape(text)}</li>")
    body.append("</ul>")
    body += [_head("Where the time went", folder), h.table(time_rows(summary), TIME_COLUMNS, numeric=tuple(range(1, 11))),
             "<p class=muted>Seconds as each run measured them; a restart wait is a SIGKILL to the restarted "
             f"worker's first record. {escape(cpu_line(summary))}</p>"]
    body += [_head("Parameters and environment", folder),
             h.table([("arguments", " ".join(map(str, summary.get("command_args", [])))),
                      ("wall seconds", fmt(summary["timings"]["wall_seconds"])),
                      ("experiments at a time", summary_line(summary.get("scheduling"), summary.get("parallel", 1)))] +
                     list((summary.get("environment") or {}).items()))]
    return h.page(suite_title(summary), "".join(body))


def _table_with_links(summary: dict, folder: Path | None = None) -> str:
    out = ["<table id=scoreboard class=compact><tr>" + "".join(f"<th>{escape(c)}</th>" for c in COLUMNS) + "</tr>"]
    for r, row in zip(summary["experiments"], rows(summary)):
        cells = []
        for i, val in enumerate(row):
            link = run_page(r.get("report"), folder) if i == 0 else None
            if link:
                cells.append(f'<td><a href="{escape(link)}">{escape(str(val))}</a></td>')
            elif i == 10:
                cells.append(f"<td><span class='verdict {escape(str(val))}'>{escape(str(val))}</span></td>")
            else:
                cells.append(f"<td{' class=n' if 0 < i < 10 or i == 11 else ''}>{escape(str(val))}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    return "".join(out) + "</table>"


def run_page(report, folder: Path | None = None) -> str | None:
    """The link to a run's report.html from a suite entry's `report` (its report.json, relative to the
    suite folder), or None when that is not a relative path inside the suite folder (`folder`, when
    known): a suite.json edited to link `javascript:...` or `../../elsewhere` gets no link."""
    if not isinstance(report, str) or not report.endswith("report.json"):
        return None
    return href(report[:-len("report.json")] + "report.html", folder)


def write_suite(folder: Path) -> Path:
    from .validate import read_suite
    folder = Path(folder)
    summary = read_suite(folder / "suite.json")
    from .guesses import read
    recorded = read(folder)
    text, page = render_md(summary, recorded), render_html(summary, folder, recorded)   # both before writing either
    from ..core.safefile import write_text
    for name, content in (("suite.md", text), ("suite.html", page)):
        write_text(folder / name, content)
    return folder
