"""A second hostile review (fresh cases after issue 29): each test here failed on the code it was written against.

Pure logic or the local filesystem only: no stack needed.
"""

import json
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.sample_report import sample

REPO = Path(__file__).resolve().parents[2]


def _compare(*args):
    p = subprocess.run([sys.executable, "-m", "harness.cli", "compare", *map(str, args)],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    return p.returncode, p.stdout + p.stderr


def _suite(folder: Path, reports, extra=()):
    folder.mkdir(parents=True)
    entries = []
    for d in reports:
        (folder / d["experiment"]).mkdir()
        (folder / d["experiment"] / "report.json").write_text(json.dumps(d))
        entries.append({"experiment": d["experiment"], "report": f"{d['experiment']}/report.json",
                        "verdict": d["verdict"]})
    entries += list(extra)
    (folder / "suite.json").write_text(json.dumps({"schema_version": 1, "suite_id": folder.name,
                                                   "experiments": entries,
                                                   "environment": reports[0]["environment"]}))
    return folder


# -- (2) the chown walk re-resolves every path: a folder swapped for a link mid-walk redirects it ----------

@pytest.mark.skipif(os.geteuid() != 0, reason="only root gives the folder to the postgres user")
def test_chown_walk_is_not_redirected_by_a_folder_swapped_for_a_link_mid_walk(tmp_path, monkeypatch):
    """The postgres user owns $HARNESS_HOME/postgres, so it may rename a sub-folder and put a link in its
    place between os.walk listing a name and root's os.chown of `root/sub/name` (which follows links in
    every component but the last). Staged here deterministically at the first chown of that file."""
    from harness.stack.local_postgres import LocalPostgres
    try:
        pw = pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("no postgres user")
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "shadow"
    victim.write_text("root's\n")
    pg = LocalPostgres(tmp_path / "state")
    (pg.home / "data" / "x").mkdir(parents=True)
    (pg.home / "data" / "x" / "shadow").write_text("planted\n")
    real_chown = os.chown
    swapped = []

    def racing_chown(path, *a, **kw):
        if not swapped and str(path).endswith(os.path.join("x", "shadow")):
            x = pg.home / "data" / "x"
            os.rename(x, pg.home / "data" / "x.old")
            os.symlink(outside, x)
            swapped.append(True)
        return real_chown(path, *a, **kw)
    monkeypatch.setattr(os, "chown", racing_chown)
    pg._chown(pg.home)
    assert victim.stat().st_uid == 0, "root gave a file outside the postgres folder to postgres"


# -- (6) the CI gate passes damage it cannot see ----------------------------------------------------------

def test_gate_fails_a_suite_whose_damaging_report_is_missing_though_suite_json_says_as_predicted(tmp_path):
    """suite.json's own verdict for an experiment without a report is trusted: delete the bad run's
    report.json and write "as-predicted" beside it, and `--fail-on unexpected` passes."""
    f = _suite(tmp_path / "s", [sample("offset-after", lost=0)],
               extra=[{"experiment": "offset-before", "report": "offset-before/report.json",
                       "verdict": "as-predicted"}])
    rc, out = _compare(f, "--fail-on", "unexpected")
    assert rc != 0, out


def test_gate_lost_gt_0_does_not_pass_an_unknown_lost(tmp_path):
    """`"lost": null` (unknown) beside verdict as-predicted: `--fail-on lost>0` skips the experiment, exit 0."""
    bad = sample("offset-before", lost=0)
    bad["counts"]["lost"] = None
    f = _suite(tmp_path / "s", [sample("offset-after", lost=0), bad])
    rc, out = _compare(f, "--fail-on", "lost>0")
    assert rc != 0, out


def test_gate_lost_gt_0_does_not_pass_a_newer_schema_report_without_counts(tmp_path):
    """A report that says schema_version 3 (an older one) is checked leniently (nothing required): drop `counts` and
    `--fail-on lost>0` skips that experiment with only a warning, exit 0."""
    bad = sample("offset-before", lost=5)
    bad["schema_version"] = 3
    del bad["counts"]
    f = _suite(tmp_path / "s", [sample("offset-after", lost=0), bad])
    rc, out = _compare(f, "--fail-on", "lost>0")
    assert rc != 0, out


# -- (1) SQL from a report handed to the reader as a command to run ------------------------------------------

def test_audit_it_yourself_never_prints_sql_taken_from_the_report():
    """`params.audit_sql` edited into any report (here offset-after's) becomes, under "Audit it yourself",
    `psql -c 'drop schema harness cascade'` -- to be pasted after `eval "$(harness env)"`, i.e. as the
    run role that owns the harness schema -- and `harness audit RUN --audit-sql '...'`."""
    from harness.reporting import html, markdown
    from harness.reporting.recount_by_hand import commands
    from harness.reporting.run_report import RunReport
    d = sample("offset-after")
    d["params"]["audit_sql"] = "drop schema harness cascade"
    assert not any("drop schema" in cmd for _, cmd in commands(d))
    r = RunReport(d)
    section = markdown.render(r).split("## Audit it yourself")[1]
    assert "drop schema" not in section
    assert "drop schema" not in html.render(r).split("Audit it yourself")[-1]


# -- (5) renderings -------------------------------------------------------------------------------------------

def test_suite_html_link_cannot_leave_the_suite_folder_by_percent_encoded_dot_segments(tmp_path):
    """Browsers resolve `%2e%2e` as `..` (WHATWG URL), so this link leads out of the suite folder."""
    from harness.reporting.suite_report import run_page
    for report in ("%2e%2e/%2e%2e/%2e%2e/etc/report.json", ".%2E/.%2E/report.json"):
        link = run_page(report, tmp_path)
        assert link is None or "%2e" not in link.lower(), link


def test_markdown_makes_no_link_of_a_bare_url_from_a_report():
    """GitHub (GFM) turns a bare `https://...` or `www.` into a link; escape.md promises no link."""
    from harness.core.escape import md
    for text in ("https://evil.example/login", "www.evil.example"):
        assert md(text) != text, "a bare URL passes through md() unchanged and renders as a link"


# -- (2) a report folder whose parent another user owns: swapped for a link between reading and writing -------

def test_report_writes_nowhere_but_the_folder_it_read_when_the_folder_is_swapped_for_a_link(tmp_path, monkeypatch):
    """`harness report DIR` checks DIR (ours, not world-writable) but not its parent: a user who owns the
    parent renames DIR and puts a link to a root-owned folder in its place while the report renders
    (staged here inside markdown.render), and root writes report.json/md/html into that folder."""
    from harness.cli.commands.report import rerender
    from harness.reporting import markdown
    parent, victim = tmp_path / "theirs", tmp_path / "victim"
    parent.mkdir()
    victim.mkdir()
    run = parent / "run"
    run.mkdir()
    (run / "report.json").write_text(json.dumps(sample("offset-after")))
    real_render = markdown.render
    swapped = []

    def render_and_swap(r):
        out = real_render(r)
        if not swapped:
            os.rename(run, parent / "run.old")      # what the parent's owner may do at any moment
            os.symlink(victim, run)
            swapped.append(True)
        return out
    monkeypatch.setattr(markdown, "render", render_and_swap)
    try:
        rerender(run)
    except Exception:  # noqa: BLE001 - refusing is fine; writing elsewhere is not
        pass
    assert sorted(os.listdir(victim)) == [], f"root wrote {sorted(os.listdir(victim))} into a folder it never read"


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can make a link of another user")
def test_run_folder_is_not_claimed_through_a_link_another_user_planted(tmp_path):
    """`--out /tmp/ci-out` that another user created first as a link to a root-owned empty folder: the
    run claims the link's target (its owner file, then crash plan, logs and report all land there)."""
    from harness.core.errors import HarnessError
    from harness.core.rundir import claim_run_dir
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user nobody")
    theirs, victim = tmp_path / "theirs", tmp_path / "victim"
    theirs.mkdir()
    victim.mkdir()
    os.chown(theirs, nobody.pw_uid, nobody.pw_gid)
    link = theirs / "ci-out"
    link.symlink_to(victim)
    os.lchown(link, nobody.pw_uid, nobody.pw_gid)
    try:
        claim_run_dir(link)
    except HarnessError:
        pass
    assert os.listdir(victim) == [], "the run claimed a folder through another user's link"


# -- (6) valid reports, invalid output ----------------------------------------------------------------------

def test_compare_json_output_is_strict_json_for_tiny_but_valid_timings(tmp_path):
    """`timings.wall_seconds` 5e-324 (valid: a number >= 0) beside 1.0: the percent change overflows to
    inf and `compare --format json` prints `Infinity`, which no strict JSON parser (JSON.parse, jq --strict
    consumers, json.loads with parse_constant) accepts."""
    a, b = sample("offset-before"), sample("offset-before")
    a["timings"]["wall_seconds"] = 5e-324
    b["timings"]["wall_seconds"] = 1.0
    for name, d in (("a", a), ("b", b)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "report.json").write_text(json.dumps(d))
    p = subprocess.run([sys.executable, "-m", "harness.cli", "compare", str(tmp_path / "a"), str(tmp_path / "b"),
                        "--format", "json"], capture_output=True, text=True, cwd=REPO, timeout=120)

    def refuse(name):
        raise ValueError(f"not JSON: {name}")
    json.loads(p.stdout, parse_constant=refuse)


# -- (8) a FIFO the postgres user plants in the folder it owns --------------------------------------------------

def test_a_fifo_planted_at_server_log_does_not_hang_up(tmp_path):
    """$HARNESS_HOME/postgres belongs to the postgres user, who may put a FIFO at server.log: root's
    `harness up` opens it for writing (`_own_log`, O_WRONLY without O_NONBLOCK) and waits for a reader
    forever. Run in a child process so the test itself cannot hang."""
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from harness.stack.local_postgres import LocalPostgres\n"
        "from harness.core.errors import HarnessError\n"
        "pg = LocalPostgres(Path(sys.argv[1]))\n"
        "try:\n"
        "    pg._own_log()\n"
        "except (HarnessError, OSError):\n"
        "    pass\n"
        "pg.log_tail()\n")
    state = tmp_path / "state"
    (state / "postgres").mkdir(parents=True)
    os.mkfifo(state / "postgres" / "server.log")
    try:
        subprocess.run([sys.executable, "-c", code, str(state)], cwd=REPO, timeout=20, capture_output=True)
    except subprocess.TimeoutExpired:
        pytest.fail("_own_log / log_tail hung on a FIFO at postgres/server.log")


@pytest.mark.skipif(os.geteuid() != 0, reason="the postgres user is another user only when the harness is root")
def test_init_does_not_copy_a_file_the_postgres_user_links_at_postgresql_conf(tmp_path, monkeypatch):
    """initdb runs as postgres and leaves data/postgresql.conf, which root then reads (following links) and
    rewrites with its settings appended: a link put there by the postgres user (staged here as initdb's
    last act) makes root copy a file only root may read into data/, where the postgres user reads it."""
    import tempfile
    from harness.stack import local_postgres
    from harness.stack.local_postgres import LocalPostgres
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("no postgres user")
    base = Path(tempfile.mkdtemp(prefix="hostile-conf-"))
    try:
        os.chmod(base, 0o755)
        secret = tmp_path / "root-only"
        secret.write_text("root:$6$HASH:19000::::::\n")
        os.chmod(secret, 0o600)
        pg = LocalPostgres(base / "state")

        def fake_initdb(argv, what, timeout):
            pg.data.mkdir(parents=True)
            (pg.data / "PG_VERSION").write_text("15\n")
            (pg.data / "postgresql.conf").symlink_to(secret)
        monkeypatch.setattr(pg, "_run", fake_initdb)
        try:
            pg.init(Path("/nonexistent-bindir"))
        except Exception:  # noqa: BLE001 - refusing is fine; copying is not
            pass
        conf = pg.data / "postgresql.conf"
        assert not (conf.exists() and "$6$HASH" in conf.read_text() and not conf.is_symlink()), \
            "root copied a root-only file into the postgres data folder"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_gate_does_not_read_one_experiments_report_for_another(tmp_path):
    """suite.json's entry for offset-before names offset-after's report.json (the same report twice): the
    gate reads the good run for both and passes, though offset-before/report.json lost 9 (verdict
    unexpected). Nothing checks that the report is of the experiment its entry names."""
    good, bad = sample("offset-after", lost=0), sample("offset-before", lost=9, verdict="unexpected")
    f = _suite(tmp_path / "s", [good, bad])
    suite = json.loads((f / "suite.json").read_text())
    suite["experiments"][1]["report"] = "offset-after/report.json"
    suite["experiments"][1]["verdict"] = "as-predicted"
    (f / "suite.json").write_text(json.dumps(suite))
    rc, out = _compare(f, "--fail-on", "lost>0")
    assert rc != 0, out
