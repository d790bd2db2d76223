#!/usr/bin/env python3
"""Writes src/main/resources/harness/eosstreams/worker-classes.txt.

A warm spare (--standby) loads, without initialising them, the classes of that
list while it waits, so that the real start finds them loaded. The list is
what normal workers load: this script runs `standby_smoke.py --mode cold` (one
instance per attempt, no spare) with class-load logging and keeps every class
that came from the jar or from a JDK module outside the JDK's class-data archive
(those from the archive are cheap anyway), in the order of their first load.
Hidden classes (lambdas, method handles) cannot be named, so they are left out.

Rerun it after upgrading Kafka, Jackson, the JDBC driver or the JDK (a stale
list costs nothing but warm-up time: missing names are skipped), then rebuild:

    python3 make_class_list.py && mvn -o -q package
"""

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "src" / "main" / "resources" / "harness" / "eosstreams" / "worker-classes.txt"
LINE = re.compile(r"^\[[^\]]*\]\s+(\S+) source: (.*)$")


def keep(name: str, source: str) -> bool:
    if "/0x" in name or "$$Lambda" in name or "LambdaForm$" in name:
        return False
    return source.startswith(("jar:", "file:", "jrt:/"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--jar", default=str(HERE / "target" / "eos-streams.jar"))
    args = ap.parse_args()

    logs = Path(tempfile.mkdtemp(prefix="eos-streams-classes-"))
    jvm = (f"-XX:TieredStopAtLevel=1 -XX:CompileThresholdScaling=5 -XX:+UseSerialGC -Xmx512m -XX:-UsePerfData "
           f"-Dharness.worker=true -Xlog:class+load=info:file={logs}/load-%p.log:uptime")
    rc = subprocess.run([sys.executable, str(HERE / "standby_smoke.py"), "--mode", "cold", "--jar", args.jar,
                         "--count", "40", "--crashes", "2", "--dwell", "0.5", "--jvm", jvm]).returncode
    if rc != 0:
        print(f"standby_smoke.py failed ({rc}); list not written", file=sys.stderr)
        return 1
    names: list[str] = []
    seen: set[str] = set()
    for f in sorted(logs.glob("load-*.log"), key=lambda p: p.stat().st_mtime):
        for line in f.read_text(errors="replace").splitlines():
            m = LINE.match(line)
            if m and keep(*m.groups()) and m.group(1) not in seen:
                seen.add(m.group(1))
                names.append(m.group(1))
        f.unlink()
    logs.rmdir()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("# Classes a worker loads (make_class_list.py); a --standby spare loads them while it waits.\n"
                   + "\n".join(names) + "\n")
    print(f"{len(names)} classes -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
