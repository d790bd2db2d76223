"""A worker stand-in for the fork server's tests: `python -m tests.unit.forked_standin ACT FILE`.

ACT: exit-N (exit with N), crash (SIGKILL itself), sleep (a minute), standby (read one line from stdin and
write it to FILE), env (write $HARNESS_STANDIN to FILE), argv (write sys.argv to FILE), raise (an exception),
report-then-exit-N (a history in folder FILE gets one delivery report, then the process exits with N, as a
fenced worker does), flood (20 MB to stdout, and a last line to stderr).
"""

import json
import os
import signal
import sys
import time


def main(argv) -> int:
    act, out = argv[0], argv[1] if len(argv) > 1 else None
    if act.startswith("exit-"):
        return int(act[5:])
    if act == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    if act == "sleep":
        time.sleep(60)
    if act == "standby":
        line = sys.stdin.readline()
        with open(out, "w") as f:
            f.write(line)
    if act == "env":
        with open(out, "w") as f:
            f.write(os.environ.get("HARNESS_STANDIN", "<unset>") + "|" + str("HARNESS_FORKSERVER_FD" in os.environ))
    if act == "argv":
        with open(out, "w") as f:
            json.dump(sys.argv, f)
    if act == "flood":
        for _ in range(20000):
            sys.stdout.write("y" * 999 + "\n")
        sys.stdout.flush()
        sys.stderr.write("the last line\n")
    if act == "raise":
        raise RuntimeError("a stand-in's own error")
    if act.startswith("report-then-exit-"):
        from harness.runtime.history import History

        class Msg:
            def key(self): return b"a"
            def partition(self): return 0
            def offset(self): return 9
            def topic(self): return "out"
        History(out, "w0", 1).on_delivery()(None, Msg())
        sys.exit(int(act[len("report-then-exit-"):]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
