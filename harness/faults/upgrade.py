"""rolling-upgrade: the local or compose 3-node cluster moved from one Kafka release to another under load.

Kafka's own transaction tests run a transactional copier while each node of
the cluster in turn is upgraded, then bump the cluster's features. This does
the same to the cluster the harness started on the `from` release (`harness
up --brokers 3 --kafka-version FROM`): once the workers have read their first
record, each node in turn (1, 2, 3) is asked to shut down cleanly (SIGTERM:
a controlled shutdown hands its leaderships over), started again on the `to`
release's jars with the same data folder and settings (its folder then names
`to` as its release), and waited for until it answers and every partition's
replicas are back in sync. Then the cluster's features are finalized with
Kafka's own FeatureCommand (`upgrade --release-version`: metadata.version,
transaction.version 2, group.version 1 from 4.0): at once (`finalize=mid`,
while the workers still run: transactions are open as transaction.version
goes from 1 to 2) or once the workers have finished (`finalize=end`, the
default). Once begun, the upgrade goes on to its end even when the workers finish
first. Each node's restart is one entry of the report's faults, marked on
the timeline with its release; the finalize is one more, with the feature
levels the broker answered before and after. A downgrade is refused in one
line: a finalized metadata.version cannot go back. On the compose cluster
(`harness up --stack compose --brokers 3 --kafka-version FROM`) each node is
a container: SIGTERM to it, then `docker compose up --no-deps
--force-recreate` of its service alone on the `to` release's image (same
volume and settings; stack/compose.py `recreate`), which must be on the
engine before the run.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time

from ..core.errors import HarnessError, first_line
from .broker import BrokerFault

FINALIZE = ("end", "mid")
STOP_TIMEOUT_S = 60.0          # a node that has not ended its controlled shutdown by then is killed (said so)
FINALIZE_TIMEOUT_S = 180.0
FEATURE_TOOL = "org.apache.kafka.tools.FeatureCommand"


def release_tuple(release: str) -> tuple:
    return tuple(int(x) for x in release.split("."))


class RollingUpgrade(BrokerFault):
    name = "rolling-upgrade"
    action = "SIGTERM"
    verb = "upgraded"
    excludes = {n: "one node out at a time: the upgrade stops each node in turn" for n in
                ("broker-kill", "broker-pause", "leader-kill")}
    options = {"from": "the release the cluster runs (harness up --brokers 3 --kafka-version FROM)",
               "to": "the newer release each node is restarted on, one at a time",
               "finalize": "end (after the workers finished, the default) or mid (as soon as every node runs "
                           "`to`, under load): the features' upgrade (metadata.version, transaction.version 2)",
               "every": "seconds between a node back in sync and the next node's stop (default 2)"}

    def __init__(self, frm: str, to: str, finalize: str = "end", every: float = 2.0, seed: int = 25):
        super().__init__(count=3, every=every, down=0.0, seed=seed)
        self.frm, self.to, self.finalize = frm, to, finalize
        self.features: list[dict] = []        # {time, when, levels}: what the broker answered
        self.finalized: dict | None = None    # the FeatureCommand's run: time, exit code, its last line
        self.tools = None                     # Kafka's command-line tools' jars (resolved at setup)
        self.image = None                     # on compose: the `to` image each container is recreated on
        self._proc = None
        self._props = None

    @classmethod
    def from_options(cls, spec: str, opts: dict, params) -> "RollingUpgrade":
        from ..stack import kafka_versions
        from .base import number
        frm, to = opts.pop("from", None), opts.pop("to", None)
        if not frm or not to:
            raise HarnessError(f"--fault {spec}: give from=RELEASE and to=RELEASE, e.g. "
                               f"rolling-upgrade:from=3.9.1,to=4.4.0")
        for r in (frm, to):
            kafka_versions.check(r)
        if release_tuple(to) <= release_tuple(frm):
            raise HarnessError(f"--fault {spec}: to={to} is not newer than from={frm}; a downgrade is refused "
                               f"(a finalized metadata.version cannot go back)")
        finalize = opts.pop("finalize", "end")
        if finalize not in FINALIZE:
            raise HarnessError(f"--fault {spec}: finalize must be end or mid, got {finalize!r}")
        every = number(spec, "every", opts.pop("every"), float, 0.0, 3600) if "every" in opts else 2.0
        return cls(frm, to, finalize, every, params.seed)

    def describe(self) -> dict:
        return {"fault": self.name, "from": self.frm, "to": self.to, "finalize": self.finalize, "every": self.every}

    def check_stack(self, stack, docker_client=None) -> None:
        if stack.kind not in ("local", "compose"):
            raise HarnessError(f"--fault {self.name} restarts the nodes of a cluster the harness started on another "
                               f"release; start one with `harness up --brokers 3 --kafka-version {self.frm}`")
        how = "--stack compose " if stack.kind == "compose" else ""
        if stack.kafka_version != self.frm:
            raise HarnessError(f"--fault {self.name}: the cluster runs Kafka {stack.kafka_version or 'unknown'}, "
                               f"not from={self.frm}; start it with `harness down --purge` then `harness up "
                               f"{how}--brokers 3 --kafka-version {self.frm}`")
        super().check_stack(stack, docker_client)
        if stack.kind == "compose":
            from ..stack.compose import upgrade_image
            self.image = upgrade_image(self.frm, self.to)
            if not self.hands.has_image(self.image):
                build = (f"HARNESS_KAFKA_VERSION={self.to} bash scripts/build-images.sh --only kafka"
                         if self.image.startswith("harness-kafka:") else f"docker pull {self.image}")
                raise HarnessError(f"--fault {self.name}: the Docker engine has no image {self.image} to upgrade the "
                                   f"compose cluster to; make it first (`{build}`)")

    def setup(self, run) -> None:
        super().setup(run)
        from ..stack.maven import resolve_kafka, resolve_tools
        if self.image is None:
            resolve_kafka(run.log, self.to)   # the new jars are on disk before the first node stops
        self.tools = resolve_tools(run.log)
        self._levels("before")

    # -- one node: stop cleanly, start on `to`, wait until it answers and all is in sync ---------------
    def choose(self, sup) -> tuple[int | None, str]:
        return self.hands.node_ids()[self.i], f"{self.frm} -> {self.to}"

    def strike(self, node: int) -> str | None:
        return self.hands.stop(node)

    def may_recover(self, now: float) -> bool:
        cur = self.struck[-1]
        if not self.hands.running(cur["node"]):
            return True
        if now - cur["time"] > STOP_TIMEOUT_S:
            self.hands.kill(cur["node"])
            cur["note"] = f"its controlled shutdown took over {STOP_TIMEOUT_S:.0f} s: killed"
        return False

    def recover(self, node: int) -> str | None:
        if self.image:                        # compose: the container recreated on the `to` image, same volume
            return self.hands.start(node, release=self.to, image=self.image)
        return self.hands.start(node, release=self.to) + f" on Kafka {self.to}"

    def back(self, node: int) -> bool:
        return self.hands.answers(node) and self.hands.in_sync()

    # -- then the features ---------------------------------------------------------------------------
    def busy(self) -> bool:
        """Once begun, the upgrade goes on to its end (every node, then the features) even when the workers
        finished first: a cluster is never left half upgraded by the run's end."""
        return super().busy() or self.state in ("idle", "to-finalize", "finalizing")

    def _next(self, now: float) -> None:
        super()._next(now)
        if self.state == "done" and self.i >= self.count:
            self.state = "to-finalize"

    def tick(self, sup) -> None:
        if self.state == "to-finalize":
            if self.finalize == "mid" or all(s.finished for s in sup.slots):
                self._start_finalize()
            return
        if self.state == "finalizing":
            self._poll_finalize()
            return
        if self.state == "idle":              # between two nodes: the next one's turn, workers done or not
            if time.time() >= self.next_at:
                self._strike(sup, time.time())
            return
        super().tick(sup)

    def _start_finalize(self) -> None:
        from ..clients import kafka_client, kafka_java
        bootstrap = self.run.stack.bootstrap_servers
        java = kafka_java.java_properties(kafka_client.settings_for(bootstrap), "Kafka's FeatureCommand")
        config = []
        if java:
            fd, self._props = tempfile.mkstemp(prefix="harness-tool-", suffix=".properties")     # 0600
            with os.fdopen(fd, "w") as f:
                f.write(kafka_java.properties_text(java))
            config = ["--command-config", self._props]
        version = ".".join(self.to.split(".")[:2])
        cmd = ["java", "-Xmx128m", "-XX:TieredStopAtLevel=1", "-cp", f"{self.tools}/*", FEATURE_TOOL,
               "--bootstrap-server", bootstrap, *config, "upgrade", "--release-version", version]
        self.finalized = {"time": round(time.time(), 3), "release_version": version}
        try:
            self._proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                          stdin=subprocess.DEVNULL)
        except OSError as e:
            self._end_finalize(None, f"could not start {FEATURE_TOOL}: {first_line(e)}")
            return
        self.state = "finalizing"

    def _poll_finalize(self) -> None:
        rc = self._proc.poll()
        if rc is None and time.time() - self.finalized["time"] < FINALIZE_TIMEOUT_S:
            return
        if rc is None:
            self._proc.kill()
        out = (self._proc.communicate()[0] or "").strip().splitlines()
        self._end_finalize(rc, out[-1][:300] if out else "")

    def _end_finalize(self, rc, said: str) -> None:
        if self._props:
            os.unlink(self._props)
            self._props = None
        self.finalized.update({"exit_code": rc, "said": said, "done_at": round(time.time(), 3)})
        self._levels("after")
        self.state = "done"

    def finish(self, sup) -> None:
        if self.state == "out":               # the run ends mid-stop: let the node end, then start it on `to`
            node, deadline = self.struck[-1]["node"], time.time() + STOP_TIMEOUT_S
            while self.hands.running(node) and time.time() < deadline:
                time.sleep(0.2)
            if self.hands.running(node):
                self.hands.kill(node)
                time.sleep(0.5)
        super().finish(sup)
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
            self._end_finalize(None, "stopped with the run")

    def _levels(self, when: str) -> None:
        from ..stack.broker_version import features
        found = features(self.run.stack.bootstrap_servers)
        self.features.append({"time": round(time.time(), 3), "when": when,
                              "levels": dict(sorted(found.items())) if found is not None else "unknown"})

    # -- what the report says -------------------------------------------------------------------------
    def entries(self, crashes, events) -> list[dict]:
        out = []
        for row in super().entries(crashes, events):
            row.update({"from": self.frm, "release": self.to if row.get("recovered_at") else self.frm,
                        "mark": f"node {row['node']} -> Kafka {self.to}"})
            out.append(row)
        if self.finalized:
            after = next((f["levels"] for f in self.features if f["when"] == "after"), "unknown")
            before = next((f["levels"] for f in self.features if f["when"] == "before"), "unknown")
            out.append({"fault": self.name, "time": self.finalized["time"], "target": "the cluster's features",
                        "finalize": self.finalize, **self.finalized, "features_before": before,
                        "features_after": after, "mark": "features: " + _levels_text(after)})
        return out

    def story(self, events) -> dict:
        return {**super().story(events), "from": self.frm, "to": self.to, "finalize": self.finalize,
                "features": self.features, "finalized": self.finalized}

    def sentence(self, story: dict | None) -> str:
        said = super().sentence(story)
        if self.finalized:
            after = next((f["levels"] for f in self.features if f["when"] == "after"), "unknown")
            said += (f" Features finalized ({self.finalize}, exit {self.finalized.get('exit_code')}): "
                     f"{_levels_text(after)}.")
        return said

    def shortfall(self, crashes, story: dict | None) -> str:
        said = super().shortfall(crashes, story)
        if story and story["struck"] == story["planned"] and not self.finalized:
            said += f" The features were not finalized ({self.missed_because()})."
        return said


def _levels_text(levels) -> str:
    """e.g. "metadata.version 4.4-IV2, transaction.version 2, group.version 1" (0: not finalized)."""
    from ..stack.broker_version import metadata_version
    if not isinstance(levels, dict):
        return "unknown (the broker could not be asked)"
    return (f"metadata.version {metadata_version(levels) or 'unknown'}, transaction.version "
            f"{levels.get('transaction.version', 0)}, group.version {levels.get('group.version', 0)}")
