"""Experiment files: one TOML file says what to run, so a run can be kept, reviewed and shared as a file.

A file names an experiment kind, its options (the declared run options, by
their Python names), its faults (the same specs as `--fault`), what the stack
must offer and a one-line purpose:

    purpose = "One line: what the run shows."
    experiment = "KIND"                 # a declared kind, as `harness experiments` lists them
    faults = ["planned-crash"]          # optional: the experiment's default faults otherwise
    [options]
    messages = 1000
    [stack]                             # optional: checked before a run on the local stack
    brokers = 3
    node_networks = true
    proxies = true
    kafka_version = "3.9.1"

The file is user input: it is read with a size bound, parsed by tomllib and
validated against a JSON Schema generated from the declarations (`schema()`,
printed by `harness experiments --schema`), so the schema cannot drift from the
options `harness run` takes. Every mistake is one line naming the file and the
key, with the valid choices and the nearest one. A valid file becomes exactly
the keyword arguments its command line gives `RunParams` (`run_kwargs`): the
run then goes the same way as from flags.

The folder of files, `experiments/` (one subfolder per suite group), is found
first in the current directory and then among the package's data files
(`experiments_root`; the package carries the repository's experiments/), so a
team can keep its own `experiments/` in its repository and run from there.
"""

from __future__ import annotations

import os
import stat
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import HarnessError, did_you_mean

MAX_BYTES = 64 * 1024                 # an experiment file is a few lines; this bounds a hostile one
MAX_FILES = 200                       # files in one folder `harness suite` runs
MAX_PURPOSE = 300
TOP_KEYS = ("purpose", "experiment", "options", "faults", "stack")
STACK_KEYS = ("brokers", "node_networks", "proxies", "kafka_version")
SUFFIX = ".toml"


@dataclass(frozen=True)
class ExperimentFile:
    path: Path
    name: str                         # the file's stem: the run's name in a suite
    purpose: str
    experiment: str
    options: dict                     # option name -> value, as the file gives it (floats as float)
    faults: tuple                     # --fault specs; empty: the experiment's default faults
    stack: dict                       # brokers, node_networks, proxies, kafka_version (those given)


# -- the schema --------------------------------------------------------------------------------------

def _option_schema(opt) -> dict:
    kind = {int: "integer", float: "number", str: "string", bool: "boolean"}[opt.type]
    out: dict = {"type": kind, "description": opt.help}
    if opt.choices:
        out["enum"] = list(opt.choices)
    if opt.type in (int, float):
        if opt.low is not None:
            out["exclusiveMinimum" if opt.open_low else "minimum"] = opt.low
        if opt.high is not None:
            out["maximum"] = opt.high
    if opt.type is str and not opt.choices:
        out["minLength"] = 1
    if opt.default is not None and opt.type is not bool:
        out["default"] = opt.default
    return out


def _fault_pattern(cls) -> str:
    import re
    name = re.escape(cls.name)
    if not cls.options:
        return f"^{name}$"
    key = "(" + "|".join(re.escape(k) for k in cls.options) + ")"
    pair = rf"\s*{key}\s*=[^,]*"
    return rf"^{name}(:{pair}(,{pair})*)?$"


def schema() -> dict:
    """The JSON Schema of an experiment file, generated from the declared options, kinds and faults."""
    from ..experiments import REGISTRY
    from ..faults import FAULTS
    from .params import declared
    from ..stack.kafka_versions import RELEASE
    from ..stack.local_kafka import CLUSTER_SIZES
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "harness experiment file",
        "type": "object",
        "required": ["purpose", "experiment"],
        "additionalProperties": False,
        "properties": {
            "purpose": {"type": "string", "minLength": 1, "maxLength": MAX_PURPOSE,
                        "description": "One line: what the run shows."},
            "experiment": {"type": "string", "enum": list(REGISTRY), "description": "The experiment kind."},
            "options": {"type": "object", "additionalProperties": False,
                        "properties": {name: _option_schema(d.option) for name, d in declared().items()}},
            "faults": {"type": "array", "maxItems": len(FAULTS),
                       "items": {"type": "string", "anyOf": [{"pattern": _fault_pattern(c)} for c in FAULTS.values()]},
                       "description": "--fault specs (NAME[:key=value,...]); they replace the experiment's defaults."},
            "stack": {"type": "object", "additionalProperties": False, "properties": {
                "brokers": {"type": "integer", "enum": list(CLUSTER_SIZES),
                            "description": "Kafka nodes the run needs (harness up --brokers N)."},
                "node_networks": {"type": "boolean", "description": "Needs harness up --node-networks."},
                "proxies": {"type": "boolean", "description": "Needs harness up --proxies."},
                "kafka_version": {"type": "string", "pattern": "^" + RELEASE.pattern + "$",
                                  "description": "--kafka-version: the release of a stack the run starts."}}},
        },
    }


# -- reading a file ------------------------------------------------------------------------------------

def read_bounded(path: Path) -> str:
    """The file's text, refused in one line when it is not a regular file, too large or not UTF-8."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        raise HarnessError(f"{path}: cannot read it ({e.strerror})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise HarnessError(f"{path}: not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(MAX_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        raise HarnessError(f"{path}: larger than {MAX_BYTES // 1024} KiB; an experiment file is a few lines")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise HarnessError(f"{path}: not UTF-8 text") from None


def _choices(valid, limit: int = 60) -> str:
    valid = list(valid)
    shown = ", ".join(valid[:limit])
    return shown + (f", ... ({len(valid)} in all; `harness experiments --schema`)" if len(valid) > limit else "")


def _unknown_keys(path: Path, data: dict) -> None:
    """An unknown key, in one line with the nearest valid one (before the schema, whose message says less)."""
    from .params import declared
    for where, got, valid in (("", data, TOP_KEYS), ("[options] ", data.get("options"), list(declared())),
                              ("[stack] ", data.get("stack"), STACK_KEYS)):
        if not isinstance(got, dict):
            continue
        for key in got:
            if key not in valid:
                raise HarnessError(f"{path}: unknown key {where}{key!r}; {did_you_mean(key, valid)}"
                                   f"valid keys: {_choices(valid)}")


def _say(error) -> str:
    """A jsonschema error as: the key, what it must be, what it is."""
    keys = [str(p) for p in error.absolute_path]
    where = ".".join(keys) or "(top level)"
    rule, node, value = error.validator, error.schema, error.instance
    if rule == "enum":
        near = did_you_mean(str(value), map(str, node["enum"])).rstrip("? ") if isinstance(value, str) else ""
        return (f"{where} must be one of {_choices(map(str, node['enum']))}, got {_shown(value)}"
                + (f"; {near}?" if near else ""))
    elif rule == "type":
        must = {"integer": "a whole number", "number": "a number", "string": "a string", "boolean": "true or false",
                "object": "a table", "array": "a list"}.get(node["type"], node["type"])
    elif rule in ("minimum", "exclusiveMinimum", "maximum"):
        bounds = []
        if "minimum" in node:
            bounds.append(f"at least {_number(node['minimum'])}")
        if "exclusiveMinimum" in node:
            bounds.append(f"above {_number(node['exclusiveMinimum'])}")
        if "maximum" in node:
            bounds.append(f"at most {_number(node['maximum'])}")
        must = " and ".join(bounds)
    elif rule in ("anyOf", "pattern") and keys and keys[0] == "faults":
        return _fault_problem(where, value)
    elif rule == "pattern":
        must = "a Kafka release such as 3.9.1" if keys == ["stack", "kafka_version"] else f"like {node['pattern']}"
    elif rule == "required":
        return f"missing key: {error.message.split(' ')[0]}; give {', '.join(node.get('required', []))}"
    elif rule in ("minLength", "maxLength"):
        must = "not empty" if rule == "minLength" else f"at most {node['maxLength']} characters"
    elif rule == "maxItems":
        must = f"at most {node['maxItems']} faults"
    else:
        must = error.message[:120]
    return f"{where} must be {must}, got {_shown(value)}"


def _number(x) -> str:
    return f"{x:,}" if float(x).is_integer() else f"{x:g}"


def _fault_problem(where: str, spec) -> str:
    from ..faults import FAULTS
    from ..faults.base import parse_spec
    if not isinstance(spec, str):
        return f"{where} must be a string such as \"planned-crash\", got {_shown(spec)}"
    name = spec.partition(":")[0].strip()
    if name not in FAULTS:
        return f"{where}: unknown fault {name[:40]!r}; {did_you_mean(name, FAULTS)}valid faults: {', '.join(FAULTS)}"
    try:
        opts = parse_spec(spec)[1]
    except HarnessError as e:
        return f"{where}: {e}"
    keys = list(FAULTS[name].options)
    bad = next((k for k in opts if k not in keys), None)
    return (f"{where}: fault {name} takes no option {bad[:40]!r}; {did_you_mean(bad, keys)}"
            f"valid: {', '.join(keys) or 'none'}")


def _shown(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def load(path) -> ExperimentFile:
    """Read and validate one file; raise HarnessError (one line naming the file and the key) when it is wrong."""
    import jsonschema
    path = Path(path)
    text = read_bounded(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise HarnessError(f"{path}: not valid TOML: {str(e).splitlines()[0][:160]}") from None
    except RecursionError:          # tomllib recurses per nested array or table: a hostile file nests deep
        raise HarnessError(f"{path}: its values are nested too deeply for an experiment file") from None
    _unknown_keys(path, data)
    validator = jsonschema.Draft202012Validator(schema())
    errors = sorted(validator.iter_errors(data), key=lambda e: (list(map(str, e.absolute_path)), e.validator))
    if errors:
        raise HarnessError(f"{path}: {_say(errors[0])}")
    from .params import declared
    every = declared()
    options = {k: (float(v) if every[k].option.type is float else v) for k, v in data.get("options", {}).items()}
    purpose = data["purpose"].strip()
    if not purpose or "\n" in purpose:
        raise HarnessError(f"{path}: purpose must be one line, got {_shown(data['purpose'])}")
    return ExperimentFile(path=path, name=path.stem, purpose=purpose, experiment=data["experiment"], options=options,
                          faults=tuple(data.get("faults", ())), stack=dict(data.get("stack", {})))


# -- from a file to a run ------------------------------------------------------------------------------

def run_kwargs(f: ExperimentFile, given: dict, fault_specs=()) -> tuple[dict, tuple, list[str]]:
    """(option values, fault specs, the flags that overrode the file) for `RunParams`, as `harness run` would
    build them from the equivalent command line: `given` is click's values (None, or False for a flag, when
    not given) and every value not given comes from the file. Faults given replace the file's."""
    from .params import declared
    every = declared()
    values, overridden = dict(given), []
    for name, value in f.options.items():
        cli = given.get(name)
        if cli is None or (every[name].option.type is bool and cli is False):
            values[name] = value
        else:
            overridden.append(every[name].option.flag)
    for name, value in given.items():
        if name not in f.options and value not in (None, False) and name in every:
            overridden.append(every[name].option.flag)
    faults = tuple(fault_specs) or f.faults
    if fault_specs:
        overridden.append("--fault")
    return values, faults, sorted(set(overridden))


def check_stack_needs(f: ExperimentFile, local: bool) -> None:
    """On the local stack, one line before anything starts when it lacks what the file's [stack] needs (a
    cluster, node networks, proxies); an existing cluster is checked by the faults themselves."""
    if not local:
        return
    from ..stack.local_record import proxied, read_record, size
    need, have = f.stack, size()
    words = []
    if need.get("brokers", 1) > have:
        words.append(f"{need['brokers']} brokers (it has {have})")
    if need.get("node_networks") and not (read_record() or {}).get("node_networks"):
        words.append("node networks")
    if need.get("proxies") and not proxied():
        words.append("proxies")
    if words:
        up = " ".join(["harness up", f"--brokers {need.get('brokers', 1)}"]
                      + (["--node-networks"] if need.get("node_networks") else [])
                      + (["--proxies"] if need.get("proxies") else []))
        raise HarnessError(f"{f.path}: needs a stack with {', '.join(words)}: start it with `{up}` "
                           f"(after `harness down --purge`)")


# -- finding files -------------------------------------------------------------------------------------

def is_file_argument(text: str) -> bool:
    """`harness run X`: X names a file (it ends in .toml), not an experiment kind."""
    return text.endswith(SUFFIX)


def experiments_root() -> Path | None:
    """The `experiments/` folder: the current directory's, else the one the package carries (the
    repository's experiments/, installed with it)."""
    from ..core import package_data
    for candidate in (Path.cwd() / "experiments", package_data.path("experiments")):
        if candidate.is_dir():
            return candidate
    return None


def folder_of(target: str) -> Path:
    """A folder given to `harness suite`: a group name (experiments/<group>/), else a path to a folder. A bare
    name is the group first, so a folder of that name in the current directory does not take `harness suite
    core` over; `./core` names that folder."""
    given = Path(target)
    root = experiments_root()
    if "/" not in target and root is not None and (root / target).is_dir():
        return root / target
    if given.is_dir():
        return given
    groups = sorted(p.name for p in root.iterdir() if p.is_dir()) if root is not None else []
    raise HarnessError(f"{target!r} is neither a folder nor a group of {root or 'experiments/ (none found)'}; "
                       f"{did_you_mean(target, groups)}groups: {', '.join(groups) or 'none'}")


def files_in(folder: Path) -> list[Path]:
    """The experiment files of a folder (not its subfolders), by name; refused when there are none or too many."""
    found = sorted(p for p in folder.iterdir() if p.name.endswith(SUFFIX) and p.is_file())
    if not found:
        raise HarnessError(f"{folder} holds no {SUFFIX} file")
    if len(found) > MAX_FILES:
        raise HarnessError(f"{folder} holds {len(found)} {SUFFIX} files; at most {MAX_FILES} run in one suite")
    return found


def listing(root: Path | None = None) -> list[tuple[str, str, str]]:
    """(file relative to the root, its experiment kind, its purpose) for every file under `experiments/`;
    a file that does not load is listed with its problem instead of its kind."""
    root = root or experiments_root()
    if root is None:
        return []
    out = []
    for path in sorted(root.rglob("*" + SUFFIX))[:MAX_FILES * 5]:
        try:
            f = load(path)
            out.append((str(path.relative_to(root)), f.experiment, f.purpose))
        except HarnessError as e:
            out.append((str(path.relative_to(root)), "invalid", str(e)))
    return out
