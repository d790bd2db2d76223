"""What the stock-Debian test (tests/integration/stock_debian.py) takes from the README and puts in its
container, checked without an engine: the README's apt line and first command as written, the script that
runs them, and the checkout's archive (links kept, nothing ignored)."""

import re
import tarfile

from tests.integration import stock_debian


def test_the_readme_gives_the_apt_line_and_the_first_command():
    apt, first = stock_debian.readme_lines()
    assert apt.split()[-4:] == ["python3", "python3-venv", "openjdk-17-jdk-headless", "maven"]
    assert first.startswith(stock_debian.FIRST_COMMAND)
    script = stock_debian.script(apt, first)
    assert "sudo" not in script and apt.replace("sudo ", "") in script.splitlines()
    lines = script.splitlines()
    at = lines.index(first)                                 # the README's line as written, its comment too
    assert "#" in first and lines[at - 1] == "set +e" and lines[at + 1] == "status=$?"
    assert re.search(r"^exit \$status$", script, re.M)


def test_the_archive_holds_the_checkout_with_its_links_and_nothing_ignored(tmp_path):
    with tarfile.open(stock_debian.checkout_archive(tmp_path)) as t:
        names = t.getnames()
        link = t.getmember("srv/harness/harness/_data/compose")
        assert link.issym() and link.linkname == "../../compose"
        assert t.getmember("srv/harness/scripts/setup.sh").mode & 0o111
    assert "srv/harness/README.md" in names
    assert not [n for n in names if n.startswith(("srv/harness/.venv/", "srv/harness/.harness/", "srv/harness/.git/")) or "__pycache__" in n]
