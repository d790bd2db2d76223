"""The code's shape, held by a test: layers that import only downwards, no import cycle, short modules,
and a code map (docs/design.md) that matches the tree.

Every import counts, the ones inside functions too (`import` and `from ... import`, relative ones
resolved). A unit is a package under harness/ or a top-level module; LAYERS lists them from the
bottom up, and a unit may import only from a lower layer (never from its own layer's other units, nor
upward). Moving a unit, or adding one, is a change to LAYERS and to the code map in docs/design.md together.
"""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "harness"
MAX_LINES = 400

# From the bottom up: what each layer may import is everything below it.
LAYERS = [
    ("core",),                        # errors, processes, safe files, run folders, escaping, options: no harness imports
    ("clients",),                     # Kafka and PostgreSQL client settings, connections, logs, secrets out of argv
    ("workload",),                    # payments, run names, tables, the registry of runs
    ("stack",),                       # local processes, compose, an existing cluster; the environment of a run
    ("checker", "runtime"),           # observe, predict, judge; what a worker's loop runs on
    ("experiments",),                 # declarations and their worker loops
    ("faults", "workers"),            # what breaks workers; the processes and their supervisor
    ("reporting",),                   # report.json, Markdown, HTML, compare
    ("run",),                         # params, one run, the suite, the matrix, experiment files, clean
    ("bench", "api"),                 # api: run() and Stack for Python callers
    ("cli", "pytest_plugin"),         # the command line (commands, ui, docs pages); the pytest fixtures
    ("__main__",),                    # python -m harness
]


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict) -> set[str]:
    """The harness modules `name` imports, anywhere in it."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".")
                parts = parts[:len(parts) - node.level + (1 if is_package else 0)]
                base = ".".join(parts + ([node.module] if node.module else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in modules:
                t = t.rpartition(".")[0]
            if t.startswith("harness.") and t != name:
                found.add(t)
    return found


def _unit(module: str) -> str:
    return module.split(".")[1]


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def test_every_unit_has_a_layer():
    placed = [u for layer in LAYERS for u in layer]
    assert len(placed) == len(set(placed))
    units = {_unit(m) for m in _modules() if m != "harness"}
    assert units == set(placed), f"not in LAYERS: {units - set(placed)}; gone: {set(placed) - units}"


def test_imports_only_go_down():
    layer_of = {u: i for i, layer in enumerate(LAYERS) for u in layer}
    upward = []
    for module, targets in _graph().items():
        if module == "harness":
            continue
        for target in targets:
            a, b = _unit(module), _unit(target)
            if a != b and layer_of[b] >= layer_of[a]:
                upward.append(f"{module} -> {target}")
    assert not upward, "imports that do not go to a lower layer:\n" + "\n".join(sorted(upward))


def test_no_import_cycle():
    graph = _graph()
    state: dict[str, int] = {}
    cycles = []

    def visit(m, path):
        state[m] = 1
        for t in sorted(graph.get(m, ())):
            if state.get(t) == 1:
                cycles.append(" -> ".join(path[path.index(t):] + [t]))
            elif t not in state:
                visit(t, path + [t])
        state[m] = 2
    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_no_module_is_long():
    long = {str(p.relative_to(ROOT)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_every_module_says_why_it_exists():
    silent = [str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py")
              if p.read_text().strip() and not ast.get_docstring(ast.parse(p.read_text()))]
    assert not silent, f"modules without a docstring: {silent}"


def test_the_docs_code_map_matches_the_tree():
    readme = (ROOT / "docs" / "design.md").read_text()
    block = readme[readme.index("## Layout"):]
    block = block[block.index("```") + 3:]
    block = block[:block.index("```")]
    named = set(re.findall(r"^\s{2}([a-z_]+)(?:/|\.py)\s", block, re.M))
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages <= named, f"packages the code map does not name: {packages - named}"
    gone = {n for n in named if not (PACKAGE / n).is_dir() and not (PACKAGE / f"{n}.py").exists()}
    assert not gone, f"the code map names what is not there: {gone}"
    tops = set(re.findall(r"^([a-z][a-z._-]*)/\s", block, re.M)) - {"harness"}
    assert tops and all((ROOT / t).is_dir() for t in tops), tops


# What may stand at harness/'s top beside the packages: the package itself, `python -m harness`, and the
# pytest plugin, whose dotted name the pytest11 entry point writes into every environment that installs
# the harness (and users' conftest files name). Everything else lives in the package of its layer.
TOP_MODULES = {"__init__", "__main__", "pytest_plugin"}


def test_no_loose_modules_at_the_top():
    loose = {p.stem for p in PACKAGE.glob("*.py")} - TOP_MODULES
    assert not loose, f"modules at harness/'s top, outside every package: {sorted(loose)}"


def test_no_two_modules_share_a_name():
    seen: dict[str, list[str]] = {}
    for p in PACKAGE.rglob("*.py"):
        if p.stem not in ("__init__", "__main__"):
            seen.setdefault(p.stem, []).append(str(p.relative_to(ROOT)))
    same = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert not same, f"modules with the same name: {same}"


# The checker's judging part: pure functions of what the run recorded (crash log, events, histories,
# the audit's numbers), so it is tested on hand-made data with no stack. Observing (reading Postgres and
# Kafka) is observe.py, ledger.py, accounts.py, kafka_output.py, systems.py, recount.py and their kin.
# A family's own predictors (harness/experiments/<family>/*_predictors.py) are judging too.
JUDGING = ("predict", "predictors", "verdict", "anomalies",
           "run_outcome", "write_outcomes", "histories", "deliveries", "effects", "damage", "group_timeline",
           "producer_epochs", "hanging_witness")
CONNECTS = {"psycopg", "confluent_kafka", "requests", "docker", "harness.clients.pgconn",
            "harness.clients.kafka_client"}


def _outside_imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(node.module.split(".")[0])
    return out


def _what_connects(start: str, graph: dict, modules: dict) -> list[str]:
    """The chains from `start` to an import that opens a connection, anywhere below it."""
    found, seen, todo = [], {start}, [[start]]
    while todo:
        chain = todo.pop()
        here = chain[-1]
        found += [" -> ".join(chain + [x]) for x in sorted(_outside_imports(modules[here]) & CONNECTS)]
        for nxt in sorted(graph.get(here, ())):
            if nxt in CONNECTS:
                found.append(" -> ".join(chain + [nxt]))
            elif nxt not in seen:
                seen.add(nxt)
                todo.append(chain + [nxt])
    return found


def test_the_checkers_judging_part_opens_no_connection():
    modules, graph = _modules(), _graph()
    judging = [f"harness.checker.{m}" for m in JUDGING]
    assert set(judging) <= set(modules), set(judging) - set(modules)
    families = [m for m in modules if re.fullmatch(r"harness\.experiments\.\w+\.\w+_predictors", m)]
    assert {"harness.experiments.keys.key_predictors", "harness.experiments.balances.balance_predictors"} <= set(families)
    judging += families
    found = [c for m in judging for c in _what_connects(m, graph, modules)]
    assert not found, "judging modules that reach a connection:\n" + "\n".join(found)


def test_the_connection_walk_finds_a_connection():
    # The walk above must be able to fail: observe.py reads Postgres and Kafka.
    assert _what_connects("harness.checker.observe", _graph(), _modules())


# Each experiment family is a folder under harness/experiments/: the folder's __init__.py declares its
# experiments, its worker loops live beside it, and so do the predictors only it needs. custom*.py (a
# consumer the user brings) is the one family still in loose modules.
LOOSE_FAMILIES = {"custom"}


def _family_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 3 and parts[:2] == ["harness", "experiments"] else None


def _declared_where() -> dict[str, str]:
    """Each experiment's name -> the module whose source declares it (`X = Experiment(name="...", ...)`)."""
    out = {}
    for module, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Experiment":
                for kw in node.keywords:
                    if kw.arg == "name" and isinstance(kw.value, ast.Constant):
                        out[kw.value.value] = module
    return out


def test_each_experiment_family_is_a_folder_with_its_declaration_loops_and_predictors():
    from harness.checker import predictors as shared
    from harness.experiments import REGISTRY
    where = _declared_where()
    assert set(where) == set(REGISTRY), set(where) ^ set(REGISTRY)
    families = set()
    for name, exp in REGISTRY.items():
        module = where[name]
        family = module.split(".")[2]
        if family in LOOSE_FAMILIES:
            continue
        assert (PACKAGE / "experiments" / family / "__init__.py").exists() and module.count(".") == 2, \
            f"{name} is declared in {module}, not in its family folder's __init__.py"
        families.add(family)
        for loop in filter(None, [exp.loop] + [r.loop for r in exp.roles]):
            # a family's own loop, or one it shares from another family (key-reuse runs dedupe's)
            assert _family_of(loop.__module__), \
                f"{name}'s loop {loop.__qualname__} lives in {loop.__module__}, outside every family folder"
        for pred in exp.predictors:
            home = type(pred).__module__
            assert home == shared.__name__ or _family_of(home), f"{name}'s predictor lives in {home}"
    assert len(families) >= 12, families
