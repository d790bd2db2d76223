"""The worker side of auto-commit: poll, apply, log each applied effect; the client's timer commits.
"""

from __future__ import annotations

import json
import os
import time

POLL_BATCH = 500              # the Java client's default max.poll.records
APPLIED_LOG = "applied.jsonl"


def auto_commit_loop(ctx) -> None:
    """poll, apply each effect, log it; no commit: the client's timer commits what poll handed out.
    Once everything is applied, wait for that timer to commit the end, then exit."""
    ctx.assign()
    fd = os.open(os.path.join(os.path.dirname(ctx.events.path), APPLIED_LOG),
                 os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        while True:
            for msg in ctx.poll(POLL_BATCH):
                ctx.deliver(msg)
                ctx.apply_effect(msg)
                os.write(fd, (json.dumps({"w": ctx.worker, "a": ctx.attempt, "p": msg.partition(),
                                          "o": msg.offset()}) + "\n").encode())
            if ctx.at_end():
                ctx.refresh_committed()
                if ctx.caught_up():
                    return
                time.sleep(0.05)
    finally:
        os.close(fd)
