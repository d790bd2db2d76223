"""The documentation pages the code already knows, written from the declarations so they cannot drift.

The experiments page (steps, kill points and the damage a crash there does, options, defaults), the
faults page (each `--fault` and its options), the table of every run option, and each command's
`--help` all come from the same objects the CLI reads: the experiment registry, `FAULTS`, the
declared run options and the click app. A page of docs/ holds a marker line where its generated part
goes (`<!-- generated: faults -->`); the site's build hook (docs/hooks/generated.py) puts `PAGES[name]()`
there. Nothing here is typed twice.
"""

from __future__ import annotations

import inspect

import click



def cell(text) -> str:
    """A value as one Markdown table cell: no pipe, no raw HTML, no line break."""
    s = " ".join(str(text).split())
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def experiments_page() -> str:
    from ..experiments import REGISTRY
    from ..run.params import declared
    every = declared()
    out = [
           "Generated from the declarations in `harness/experiments/` (the same ones `harness experiments` "
           "prints). Each experiment is a worker's steps per record, the kill points between them, and the "
           "damage a crash at each point can do. `--kill-point any` picks a seeded point among them per crash. "
           "The options every run takes are on the [options](options.md) page; the faults on [faults](faults.md).",
           ""]
    out += ["| experiment | what it proves |", "| --- | --- |"]
    out += [f"| [`{e.name}`](#{e.name}) | {cell(e.proves)} |" for e in REGISTRY.values()]
    for e in REGISTRY.values():
        out += ["", f"## `{e.name}` {{#{e.name}}}", "", cell(e.proves), ""]
        out += [f"- **Steps:** {cell(e.steps_text())}",
                f"- **Expected:** {cell(e.expected)}",
                f"- **Stores:** {cell(', '.join(e.stores.names()) or 'none')}",
                f"- **Faults by default:** {cell(', '.join(e.default_faults) or 'none unless --fault names them')}"]
        if e.roles:
            out.append(f"- **Processes:** {cell(', '.join(r.name for r in e.roles))}")
        if e.lesson:
            out.append(f"- **Lesson:** {cell(e.lesson)}")
        if e.kill_points:
            out += ["", "| kill point | after | before | damage | what a crash there does |",
                    "| --- | --- | --- | --- | --- |"]
            for p in e.kill_points:
                mark = " (default)" if p.name == e.default_point else ""
                out.append(f"| `{p.name}`{mark} | {cell(p.after)} | {cell(p.before or '(last step)')} | "
                           f"{cell(', '.join(sorted(p.damage)) or 'none')} | {cell(p.says)} |")
        own = [(o.flag, o.help, e.defaults.get(o.name, o.default_text())) for o in e.options]
        own += [(_flag(k), every[k].option.help if k in every else "", v) for k, v in e.defaults.items()
                if k not in {o.name for o in e.options}]
        if own:
            out += ["", "| its options and defaults | what it sets | default here |", "| --- | --- | --- |"]
            out += [f"| `{flag}` | {cell(text)} | {cell('' if d is None else d)} |" for flag, text, d in own]
    return "\n".join(out) + "\n"


def _what_fault_does(cls) -> str:
    doc = cls.__doc__ or inspect.getmodule(cls).__doc__ or ""
    return " ".join(doc.split("\n\n")[0].split())


def faults_page() -> str:
    from ..faults import FAULTS
    out = [
           "Generated from `harness/faults/`. A run's faults are chosen with a repeatable "
           "`--fault NAME[:key=value,...]`, or by the experiment's declaration (its default faults, with "
           "`--crash-rate`, `--kill-point`, `--kill-mode random --kills`). Faults compose: "
           "`harness run dedupe --fault planned-crash --fault overlap`.", ""]
    out += ["| fault | what it does |", "| --- | --- |"]
    out += [f"| [`{n}`](#{n}) | {cell(_what_fault_does(c))} |" for n, c in FAULTS.items()]
    for name, cls in FAULTS.items():
        out += ["", f"## `{name}` {{#{name}}}", "", cell(_what_fault_does(cls)), ""]
        if cls.options:
            out += [f"| `--fault {name}:` option | what it sets |", "| --- | --- |"]
            out += [f"| `{k}` | {cell(v)} |" for k, v in cls.options.items()]
        else:
            out.append("It takes no options.")
        if cls.run_options:
            out += ["", "Run options that set it up: " + ", ".join(f"`{o.flag}`" for o in cls.run_options) + "."]
        if cls.excludes:
            out += ["", "Cannot run with: " + "; ".join(f"`{k}` ({cell(v)})" for k, v in cls.excludes.items()) + "."]
    return "\n".join(out) + "\n"


def options_page() -> str:
    from ..run.params import declared
    out = [
           "Every option of `harness run` (and `harness suite`), generated from its one declaration "
           "(`harness/run/params.py`, an experiment's `options`, a fault's `run_options`). An option that belongs "
           "to some experiments or faults is refused by the others, with a line naming who takes it.", "",
           "| option | what it sets | default | allowed | taken by |", "| --- | --- | --- | --- | --- |"]
    for name, d in declared().items():
        o = d.option
        allowed = ", ".join(o.choices) if o.choices else (o.must or ("a flag" if o.type is bool else o.type.__name__))
        if not o.choices and not o.must and (o.low is not None or o.high is not None):
            allowed += f" from {o.low:g}" if o.low is not None else ""
            allowed += f" to {o.high:g}" if o.high is not None else ""
        owners = list(d.experiments) + [f.name + " (fault)" for f in d.faults]
        out.append(f"| `{o.flag}` | {cell(o.help)} | {cell(o.default_text() or '')} | {cell(allowed)} | "
                   f"{cell(o.applies_to or ', '.join(owners) or 'every run')} |")
    return "\n".join(out) + "\n"


def _helps(command: click.Command, words: list[str], parent: click.Context | None):
    settings = {**command.context_settings, "max_content_width": 100, "terminal_width": 100}
    ctx = click.Context(command, info_name=words[-1], parent=parent, **settings)
    yield " ".join(words), command.get_help(ctx)
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            yield from _helps(command.get_command(ctx, name), words + [name], ctx)


def commands_page() -> str:
    from .entry import cli
    out = [
           "Each command's `--help`, as the installed harness prints it (generated from the click app in "
           "`harness/cli/entry.py` and `harness/cli/commands/`). Every one ends with an example.", ""]
    for words, text in _helps(cli, ["harness"], None):
        out += [f"## `{words}`", "", "```text", text.rstrip(), "```", ""]
    return "\n".join(out)


def _code(text: str) -> str:
    """A command as a table cell: a code span when it can be one (no backtick or pipe), else plain text."""
    s = " ".join(str(text).split())
    return f"`{s}`" if not set(s) & set("`|") else cell(s)


def numbers_page() -> str:
    from . import docs_numbers
    out = ["| figure | value | machine | date | command | from |", "| --- | --- | --- | --- | --- | --- |"]
    out += [f"| {cell(f.figure)} | {cell(f.value)} | {cell(f.machine)} | {cell(f.date)} | {_code(f.command)} | "
            f"`{cell(f.source)}` |" for f in docs_numbers.figures()]
    return "\n".join(out) + "\n"


def counts_page() -> str:
    """The glossary of the counts: the scoreboard's legend, word for word (harness/reporting/legend.py)."""
    from ..reporting.legend import PREDICTED_NOTE, glossary_rows
    return "\n".join(["| count | what it is, exactly |", "| --- | --- |"]
                     + [f"| {cell(m)} | {cell(text)} |" for m, text in glossary_rows()] + ["", PREDICTED_NOTE])


# A page's marker name -> the function that writes that part (the hook replaces the marker with it).
PAGES = {"experiments": experiments_page, "faults": faults_page, "options": options_page,
         "commands": commands_page, "numbers": numbers_page, "counts": counts_page}
