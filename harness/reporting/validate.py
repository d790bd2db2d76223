"""Reading report.json and suite.json as files someone else may have written.

`compare`, `report` and `audit` read folders that other people produced (a CI
artifact of last night, a colleague's run). Before any number is used, the
file must be a regular file of bounded size (MAX_BYTES) and value count
(MAX_VALUES, counted on the raw bytes before parsing), parse as strict JSON (no NaN or
Infinity, no integer longer than MAX_INT_DIGITS, no nesting deeper than
MAX_DEPTH, no key twice) and follow its JSON Schema (docs/report.schema.json,
docs/suite.schema.json): a `"lost": "100"`, `"lost": [5]` or `"lost": NaN`
would otherwise pass a `--fail-on lost>0` gate. Anything else is refused with
one HarnessError line (exit 2).

A file of the current schema_version is checked against its schema in full;
an older or newer one against the same schema made lenient (no field is
required, unknown fields pass, but every known field must have its type), so
`compare` still reads old reports without trusting their types.
"""

import json
import math
import os
import stat
from functools import lru_cache
from pathlib import Path

from ..core import package_data
from ..core.errors import HarnessError
from ..core.escape import term

SCHEMAS = package_data.path("docs")   # the repository's docs/*.schema.json
CURRENT = {"report": 4, "suite": 2}   # the schema_version each schema file describes

# What a hostile file may cost before it is refused: each bound is checked on the raw bytes, before any
# parsing, so a crafted file is refused in milliseconds and a few MB (a 63 MiB one once cost 62 s and 3.4 GB
# of Python objects). A report of 1,000 payments and 100 crashes is 160 KiB and about 7,000 values.
MAX_BYTES = 16 * 1024 * 1024
MAX_VALUES = 1_000_000         # commas and opening brackets: every value but the first of each container
MAX_INT_DIGITS = 30            # counts, offsets, pids and seeds fit in 20
MAX_DEPTH = 64                 # a report nests about 7 deep


class Refused(ValueError):
    """A JSON text this module will not accept (why in args[0])."""


def read_json(path: Path) -> dict:
    """A JSON object from a regular file of at most MAX_BYTES, parsed strictly, or one HarnessError."""
    path = Path(path)
    try:
        text = _read_bounded(path)
    except UnicodeDecodeError:
        raise HarnessError(f"{_p(path)} is not a text file, so not a report") from None
    except OSError as e:
        raise HarnessError(f"cannot read {_p(path)}: {e.strerror or e}") from None
    values = text.count(",") + text.count("[") + text.count("{")      # C speed: no Python object per value
    if values > MAX_VALUES:
        raise HarnessError(f"{_p(path)} is refused: it holds about {values:,} values, more than the "
                           f"{MAX_VALUES:,} values this harness reads in a file")
    try:
        data = loads(text)
    except json.JSONDecodeError as e:
        raise HarnessError(f"{_p(path)} is not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    except Refused as e:
        raise HarnessError(f"{_p(path)} is refused: {e.args[0]}") from None
    if not isinstance(data, dict):
        raise HarnessError(f"{_p(path)} holds a JSON {type(data).__name__}, not a report object")
    return data


def _read_bounded(path: Path) -> str:
    """The file's text; a FIFO, device or folder is refused before it is read (a FIFO would hang)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(0, "not a regular file")
        if st.st_size > MAX_BYTES:
            raise OSError(0, f"it is {st.st_size / 2 ** 20:.1f} MiB, larger than the {MAX_BYTES // 2 ** 20} MiB "
                             f"this harness reads in a file")
        with os.fdopen(os.dup(fd), "rb") as f:
            raw = f.read(MAX_BYTES + 1)
    finally:
        os.close(fd)
    if len(raw) > MAX_BYTES:
        raise OSError(0, f"it is larger than the {MAX_BYTES // 2 ** 20} MiB this harness reads in a file")
    return raw.decode("utf-8")


def loads(text: str):
    """json.loads, refusing what Python accepts but a report never holds: NaN and Infinity (also as an
    overflowing 1e999), integers of more than MAX_INT_DIGITS digits, keys given twice, nesting deeper
    than MAX_DEPTH (raises Refused)."""
    try:
        data = json.loads(text, parse_constant=_constant, parse_float=_float, parse_int=_int,
                          object_pairs_hook=_object)
    except RecursionError:
        raise Refused(f"it nests deeper than {MAX_DEPTH} levels") from None
    if _depth(data) > MAX_DEPTH:
        raise Refused(f"it nests deeper than {MAX_DEPTH} levels")
    return data


def _constant(name: str):
    raise Refused(f"it holds {name}, which is not a number JSON allows")


def _float(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):
        raise Refused(f"it holds the number {text[:40]}, too large to be finite")
    return v


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise Refused(f"it holds an integer of {len(text.lstrip('-'))} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _object(pairs: list) -> dict:
    out = {}
    for k, v in pairs:
        if k in out:
            raise Refused(f"it gives the key {term(k)[:60]!r} twice in one object")
        out[k] = v
    return out


def _depth(data) -> int:
    """How deep `data` nests (without recursion)."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list)):
            deepest = max(deepest, d)
            if d > MAX_DEPTH:
                return d
            stack += [(x, d + 1) for x in (v.values() if isinstance(v, dict) else v)]
    return deepest


# -- the schemas ---------------------------------------------------------------------------

@lru_cache(maxsize=None)
def _validator(kind: str, strict: bool):
    import jsonschema
    try:
        schema = json.loads((SCHEMAS / f"{kind}.schema.json").read_text())
    except OSError:
        raise HarnessError(f"cannot check a {kind}: {SCHEMAS / (kind + '.schema.json')} is missing from "
                           f"this installation") from None
    if not strict:
        schema = lenient(schema)
    return jsonschema.Draft202012Validator(schema)


_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null", list: "array",
          dict: "object"}


def lenient(schema):
    """The schema with no field required, unknown fields allowed, a list of allowed values reduced to
    their types, schema_version any integer: what an older or newer file is held to (every field it
    shares with the current schema keeps its type)."""
    if isinstance(schema, list):
        return [lenient(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for k, v in schema.items():
        if k == "required" and isinstance(v, list) or (k == "additionalProperties" and v is False):
            continue
        if k in ("enum", "const"):   # a newer harness may add a verdict: keep only the values' types
            values = v if k == "enum" else [v]
            out.setdefault("type", sorted({_TYPES[type(x)] for x in values}))
            continue
        if k == "properties" and isinstance(v, dict):
            out[k] = {name: ({"type": "integer"} if name == "schema_version" else lenient(s))
                      for name, s in v.items()}
        else:
            out[k] = lenient(v)
    return out


def check(data: dict, kind: str, path: Path) -> list[str]:
    """Raise one HarnessError unless `data` follows the `kind` ("report" or "suite") schema; return
    notes (a newer schema_version) for the warnings."""
    version = data.get("schema_version")
    strict = version == CURRENT[kind]
    error = _first_error(_validator(kind, strict), data)
    if error is not None:
        where = "/" + "/".join(str(p) for p in error.absolute_path)
        raise HarnessError(f"{_p(path)} is not a valid {kind}.json (docs/{kind}.schema.json) at {term(where)[:120]}: "
                           f"{term(error.message)[:200]}")
    if isinstance(version, int) and not isinstance(version, bool) and version > CURRENT[kind]:
        return [f"{_p(path)} has schema_version {version}, newer than this harness reads ({CURRENT[kind]})"]
    return []


def _first_error(validator, data):
    """The error a person should see first (jsonschema's best match, which looks inside anyOf/oneOf for
    the deepest reason), or None."""
    from jsonschema.exceptions import best_match
    from itertools import islice
    return best_match(islice(validator.iter_errors(data), 100))      # a file of a million errors costs 100


def read_report(path: Path) -> tuple[dict, list[str]]:
    """(report.json's data, notes), validated, or one HarnessError."""
    data = read_json(path)
    if not isinstance(data.get("experiment"), str):
        raise HarnessError(f"{_p(path)} is not a run report (it has no 'experiment' field)")
    return data, check(data, "report", path)


def read_suite(path: Path) -> dict:
    """suite.json's data, validated, or one HarnessError."""
    data = read_json(path)
    if not isinstance(data.get("experiments"), list):
        raise HarnessError(f"{_p(path)} is not a suite (it has no 'experiments' list)")
    check(data, "suite", path)
    return data


def _p(path: Path) -> str:
    """A path for a message, its control characters shown (a folder name is not trusted either)."""
    return term(str(path))
