"""A command's use of the local stack, and what it stops when it lets go.

`harness run`, `suite`, `clean` and `bench` share the stack in the state
folder: each holds a lease (see `leases`) from the moment it decides to use
or start the stack until it is done. When it lets go, `release_plan` decides,
on plain data, what to stop: only services that commands started (never what
`harness up` started or --keep-stack kept), only when `harness up` does not
hold the stack, and only when no other command still holds a lease. So the
last command out cleans up, and no command pulls the stack from under another.
"""

import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import HarnessError
from . import leases, netns
from .local_services import services as stack_services, stop_all

DISPLAY = {"kafka": "Kafka", "postgres": "PostgreSQL", "toxiproxy": "Toxiproxy"}


def display(key: str) -> str:
    """kafka -> Kafka, kafka-2 -> Kafka node 2, postgres -> PostgreSQL, toxiproxy -> Toxiproxy."""
    return DISPLAY.get(key) or f"Kafka node {key.rpartition('-')[2]}"


@dataclass
class Claim:
    """A command's use of the local stack: its lease and the services it started."""
    state: Path
    lease: leases.Lease
    started: list = field(default_factory=list)

    def release(self, keep: bool = False, say=None) -> list[str]:
        """Give the lease back; stop the services commands started if nobody else needs them.

        Returns the services stopped. `say` gets one line when the stack is left running.
        """
        say = say or (lambda m: print(m, file=sys.stderr))
        with leases.locked(self.state, log=say):
            leases.give_back(self.lease)
            services = stack_services(self.state)
            if keep:
                for name in self.started:
                    services[name].set_owner("user")
            owners = {n: (r.owner if (r := s.running()) else None) for n, s in services.items()}
            to_stop, line = release_plan(self.started, keep, leases.held(self.state),
                                         [l.pid for l in leases.live(self.state)], owners)
            if line:
                say(line)
            stopped = []
            for name, (ok, note) in zip(to_stop, stop_all([services[n] for n in to_stop])):
                if ok:
                    stopped.append(name)
                elif note:
                    say(note)
            if stopped and not any(s.running() for n, s in services.items() if n != "postgres"):
                try:
                    netns.remove(self.state)         # the Kafka nodes' own networks, if they had them
                except HarnessError as e:
                    say(f"warning: {e}")
        return stopped


def release_plan(started: list[str], keep: bool, held: bool, others: list[int],
                 owners: dict) -> tuple[list[str], str | None]:
    """Which services a command stops when it lets go of the stack, and the line it says.

    `owners` maps each running service to "user" or "command" (None when not running).
    Only services started by commands are ever stopped, and only by the last command out
    of a stack that `harness up` does not hold.
    """
    ours = [n for n in owners if owners.get(n) == "command"]
    if keep:
        return [], ("leaving the stack this command started running (--keep-stack); "
                    "stop it with `harness down`") if started else None
    if held:
        return [], ("leaving the services this command started running: `harness up` holds the stack "
                    "(stop it with `harness down`)") if started else None
    if others:
        pids = ", ".join(str(p) for p in others)
        return [], f"leaving the stack running because another run uses it (pid {pids})" if started else None
    if not ours:
        return [], None
    who = "this command" if set(ours) <= set(started) else "harness commands"
    return ours, (f"stopping the {' and '.join(display(n) for n in ours)} {who} started "
                  f"(keep it with --keep-stack, or start it with `harness up`)")
