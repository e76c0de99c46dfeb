"""`attn-doctor rules`: the knowledge base, listed and explained in the terminal, and as the Markdown
rules reference (`rules --markdown`, docs/rules.md)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..rules.model import Rule

if TYPE_CHECKING:
    from ..diagnosis.fixtures import Example
from .console import whole_lines

SEVERITY_STYLE = {"error": "red", "warning": "yellow", "info": "cyan"}


TITLE_MIN = 30  # narrower than this, a title column wraps into a word per line


def render_rules(rules: list[Rule], console: Console) -> None:
    rules = sorted(rules, key=lambda r: r.id)
    # A name is an identifier to copy: it stays whole on its line. Where the terminal cannot hold
    # the names and a readable title column side by side, each title goes under its name.
    fixed = sum(max((len(v) for v in values), default=0) + 2
                for values in ([r.id for r in rules], [r.severity for r in rules], [r.area for r in rules], [r.name for r in rules]))
    side_by_side = whole_lines(console) or console.width - fixed >= TITLE_MIN
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("ID", no_wrap=True)
    table.add_column("Severity", no_wrap=True)
    table.add_column("Area", no_wrap=True)
    # fold, never an ellipsis, should even a name not fit
    table.add_column("Name" if side_by_side else "Name, title", overflow="fold")
    if side_by_side:
        table.add_column("Title", overflow="fold")
    for rule in rules:
        severity = Text(rule.severity, style=SEVERITY_STYLE[rule.severity])
        if side_by_side:
            table.add_row(rule.id, severity, rule.area, rule.name, rule.title)
        else:
            table.add_row(rule.id, severity, rule.area, Text.assemble(rule.name, "\n", (rule.title, "dim")))
    console.print(table)
    render_summary(rules, console)


def render_summary(rules: list[Rule], console: Console) -> None:
    console.print(Text(f"{len(rules)} rules. `attn-doctor rules ID` shows one.", style="dim"))


def paragraphs(text: str) -> list[str]:
    """A recipe's text as paragraphs of one line each: its own line breaks are not the reader's width."""
    return [" ".join(p.split()) for p in text.strip().split("\n\n") if p.strip()]


def supersedes_line(rule: Rule) -> str:
    return f"Supersedes {', '.join(rule.supersedes)}: where both fire on the same evidence, only {rule.id} is reported."


_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.\[\]]*)\}")


def _unfilled(text) -> str:
    """A template's fields, where no finding fills them (the rules reference), as what they stand
    for: `<edit>`, never a brace a reader takes for a bug."""
    return _FIELD.sub(lambda m: "<%s>" % m.group(1).replace("_", " "), str(text)) if text else text


def render_rule(rule: Rule, console: Console, example: "Example | None" = None) -> None:
    console.print(Text(f"{rule.id} {rule.name}", style="bold"))
    console.print(Text(rule.title))
    console.print(Text(f"severity: {rule.severity}   area: {rule.area}", style=SEVERITY_STYLE[rule.severity]))
    console.print()
    console.print(Text("\n\n".join(paragraphs(rule.explanation))))
    if rule.remedies:
        console.print()
        filled = _filled_remedies(rule, example)
        console.print(Text("Remedies%s:" % (" (as a report words them for its example, %s)" % example.fixture.split("[", 1)[0] if filled else
                                            ", <fields> filled from what check finds" if any(
                                                _FIELD.search(str(getattr(r, k) or "")) for r in rule.remedies
                                                for k in ("summary", "value", "requirement", "detail")) else ""),
                           style="bold"))
        for template, remedy in zip(rule.remedies, filled or rule.remedies):
            safety = "" if template.safety == "safe" else f" (unsafe: {_unfilled(template.why_unsafe)})"
            console.print(Text(f"  - [{remedy.kind}] {_unfilled(remedy.summary)}{safety}"))
            if remedy.requirement:
                console.print(Text(f"      requirement: {_unfilled(remedy.requirement)}", style="cyan"))
            if remedy.key is not None:
                console.print(Text(f"      {remedy.config}: {_unfilled(remedy.key)} = {_unfilled(remedy.value)}",
                                   style="cyan"))
            if remedy.command:
                # the recipe's form: `python`/`pip` become the target's interpreter when shown in a report
                console.print(Text(f"      command: {_unfilled(shlex.join(remedy.command))}", style="cyan"))
            if remedy.detail:
                console.print(Text(f"      {_unfilled(remedy.detail)}", style="dim"))
    if rule.signatures:
        console.print()
        console.print(Text("Error signatures:", style="bold"))
        for sig in rule.signatures:
            if isinstance(sig, str):
                console.print(Text(f"  {sig}", style="dim"))
            else:
                extra = "".join(f"   [{k}: {v}]" for k, v in (("severity", sig.severity), ("only with", sig.context)) if v)
                console.print(Text(f"  {sig.pattern}{extra}", style="dim"))
        if rule.cause:
            console.print(Text(f"Root cause class: {rule.cause}", style="dim"))
        if rule.when is None:
            console.print(Text("Recognised from messages only: `attn-doctor explain` reports it, `check` cannot.", style="dim"))
    if rule.supersedes:
        console.print(Text(supersedes_line(rule), style="dim"))
    if rule.links:
        console.print()
        for link in rule.links:
            console.print(Text(f"see {link}", style="dim"))


# ---------------------------------------------------------------- the rules reference (docs/rules.md)

AREAS = {
    "system": "System: the interpreter and its installers",
    "gpu": "GPU and driver",
    "torch": "PyTorch",
    "kernels": "Attention kernels",
    "libraries": "Libraries",
    "dtype": "The dtype path",
    "config": "Training configs",
}
REGENERATE = "attn-doctor rules --markdown > docs/rules.md"


def rules_markdown(rules: list[Rule], sources: dict[str, Path], checks: dict[str, Callable], examples: dict[str, Example]) -> str:
    """The rules reference as one Markdown page, one section per rule (as ruff's rule pages):
    what it checks, why it matters, the fix and whether `fix` applies it, its links. sources: rule
    id -> its recipe file; checks: the named checks, whose docstrings say what they look for;
    examples: rule id -> the rule fired on its first test case, which words its message and remedies."""
    rules = sorted(rules, key=lambda r: r.id)
    out = [
        "# Rules reference",
        "",
        f"Generated from `recipes/` by `{REGENERATE}`: edit the recipes, not this page. "
        "`attn-doctor rules ID` prints one rule in the terminal; "
        "[writing-rules.md](writing-rules.md) says how to add one.",
        "",
        f"{len(rules)} rules. A rule with a condition is judged by `check` on the facts it probes; "
        "a rule with error signatures is recognised by `explain` in messages and logs. "
        "`attn-doctor fix` applies, for each finding, the first remedy of its rule that it can automate; "
        "the others it lists as steps to take by hand.",
        "",
        "| ID | name | severity | title |",
        "|---|---|---|---|",
    ]
    out += [f"| [{r.id}](#{_anchor(r)}) | {r.name} | {r.severity} | {_cell(r.title)} |" for r in rules]
    for area, heading in AREAS.items():
        in_area = [r for r in rules if r.area == area]
        if not in_area:
            continue
        out += ["", f"## {heading}"]
        for rule in in_area:
            out += ["", *_rule_markdown(rule, sources.get(rule.id), checks, examples.get(rule.id))]
    return "\n".join(out) + "\n"


def _anchor(rule: Rule) -> str:
    """GitHub's anchor for the rule's heading: lower case, spaces to hyphens, punctuation dropped."""
    return re.sub(r"[^a-z0-9 _-]", "", f"{rule.id} {rule.name}".lower()).replace(" ", "-")


def _cell(text: str) -> str:
    return _prose(text).replace("|", "\\|")


def _prose(text: str) -> str:
    """Text from a recipe or a report, safe in Markdown outside its code spans: `<char, ...>` in a
    C++ message is not an HTML tag."""
    parts = re.split(r"(`[^`]*`)", text)
    return "".join(p if p.startswith("`") else re.sub(r"<(?=[A-Za-z/!?])", "&lt;", p) for p in parts)


def _case(example: Example) -> str:
    """The rule's test case: a recorded report (tests/fixtures/facts/NAME.json), maybe changed."""
    base, _, changes = example.fixture.partition("[")
    if base == "{}":
        return "on its test case"
    link = f"[{base}.json](../tests/fixtures/facts/{base}.json)"
    changed = " with a few facts changed" if changes.rstrip("]") else ""
    return f"on its test case, the recorded report {link}{changed}"


def _rule_markdown(rule: Rule, source: Optional[Path], checks: dict[str, Callable], example: Optional[Example]) -> list[str]:
    from ..rules.causes import label

    who = ("`check` and `explain`" if rule.signatures else "`check`") if rule.when is not None else "`explain` only (no probe can show it)"
    where = f" · recipe: `recipes/{source.name}`" if source else ""
    out = [f"### {rule.id} {rule.name}", "", f"**{rule.title}**", "",
           f"Severity: {rule.severity} · area: {rule.area} · reported by {who}{where}"]
    if rule.when is not None:
        out += ["", f"**What it checks.** It fires when {_condition(rule.when, checks)}."]
    if example:
        out += ["", f"A report says, for example ({_case(example)}):", "", f"> {_prose(example.message)}"]
    out += ["", "**Why it matters.**", ""]
    out += [line for p in paragraphs(rule.explanation) for line in (_prose(p), "")][:-1]
    if rule.remedies:
        out += ["", "**The fix.**" + (" Worded for the test case above; a report names your own versions." if example else ""), ""]
        out += [f"- {_prose(line)}" for line in _remedy_lines(rule, example.evidence if example else {})]
    if rule.signatures:
        out += ["", f"**Messages it recognises** (`explain`; root cause class: {label(rule.cause)}). For example:", ""]
        examples = [e.strip("\n") for e in rule.signature_fixtures.match[:3]]
        out += ["```text", *"\n\n".join(examples).split("\n"), "```"] if examples else \
            [f"- `{s if isinstance(s, str) else s.pattern}`" for s in rule.signatures]
    if rule.supersedes:
        out += ["", supersedes_line(rule)]
    if rule.links:
        out += ["", "Links: " + ", ".join(f"<{link}>" for link in rule.links)]
    return out


def _filled_remedies(rule: Rule, example: "Example | None") -> list:
    """The rule's remedies as a report words them from its example's evidence, or [] without one."""
    if example is None:
        return []
    from ..remedies import Target
    from ..diagnosis.engine import remedies

    try:
        return list(remedies(rule, example.evidence, Target("python")))
    except Exception:  # noqa: BLE001 - the reference falls back to the templates, described
        return []


def _remedy_lines(rule: Rule, evidence: dict) -> list[str]:
    """Each remedy as a report words it from this evidence (optional parts left out where a fact
    is unknown), its commands for `python`: the interpreter of the environment checked."""
    from ..remedies import Target, edit_line
    from ..diagnosis.engine import remedies

    lines = []
    for template, remedy in zip(rule.remedies, remedies(rule, evidence, Target("python"))):
        text = f"{remedy.summary}. {_offered(template)}{_applies(rule, template)}"
        setting = edit_line(remedy)
        if setting:
            text += f" The setting: {setting}."
        if remedy.command:
            text += f" Command: `{shlex.join(remedy.command)}`."
        if remedy.detail:
            text += " " + " ".join(remedy.detail.split())
        lines.append(text)
    return lines


def _offered(remedy) -> str:
    """Which environments a remedy is offered for (Remedy.for_target), as a sentence; "" for all."""
    if remedy.for_target == "installable":
        return "Offered where the environment checked is one to install into (chosen or activated, pip not refused). "
    if remedy.for_target == "not_installable":
        return ("Offered in its place where it is not: attn-doctor's own environment checked by default without "
                "torch, or a system Python that refuses pip. ")
    return ""


def _applies(rule: Rule, remedy) -> str:
    """Whether `attn-doctor fix` applies this remedy, as fix/plan.py decides."""
    if rule.when is None:  # fix plans from check's findings, which never hold a signature-only rule
        return "By hand: `attn-doctor fix` acts on what `check` finds, and `check` cannot show this rule."
    unsafe = f" It is unsafe ({remedy.why_unsafe or 'see above'}): `fix` applies it only with `--unsafe`." if remedy.safety == "unsafe" else ""
    if remedy.kind == "pip" and remedy.requirement:
        pinned = " triton is pinned by torch: where the installed torch does not pin this triton, `fix` plans the torch that brings it, which needs `--unsafe`." \
            if remedy.requirement.lower().startswith(("triton", "pytorch-triton")) and not remedy.reinstall else ""
        return f"`attn-doctor fix` applies it (with uv or pip, journaled, reversible).{pinned}{unsafe}"
    if remedy.kind == "config" and remedy.config and remedy.key:
        return f"`attn-doctor fix --config FILE` applies it to the file named.{unsafe}"
    if remedy.kind == "patch":
        if remedy.safety == "unsafe":
            return f"`attn-doctor fix` edits the installed package, only as a last resort.{unsafe}"
        return ("`attn-doctor fix --trace MODULE:FACTORY` applies it to your model (journaled, verified by tracing "
                "again, undone by `fix --undo`); without --trace, `fix` writes it as a .patch file and `--apply-patch` "
                "applies it.")
    return "By hand: `attn-doctor fix` lists it and does not apply it."


def _condition(cond, checks: dict[str, Callable]) -> str:
    """A rule's `when` in words; every part must hold."""
    parts: list[str] = []
    for names, joiner, state in ((cond.installed, "and", "installed"), (cond.installed_any, "or", "installed"),
                                 (cond.not_installed, "and", "not installed")):
        if names:
            parts.append(f"{_names(names, joiner)} {'are' if joiner == 'and' and len(names) > 1 else 'is'} {state}")
    for name, spec in cond.version.items():
        parts.append(f"`{name}` {f'`{spec}`' if spec else 'of any version'} is installed")
    if cond.gpu:
        parts.append({"present": "a GPU is present", "present_or_assumed": "a GPU is present or named with --gpu"}.get(
            cond.gpu, "no GPU is present"))
    if cond.capability:
        parts.append(f"a GPU's compute capability is `{cond.capability}`")
    if cond.torch:
        parts.append(f"importing torch gives {_names(cond.torch, 'or')}")
    if cond.torch_cuda:
        parts.append({"cuda": "torch is a CUDA build", "rocm": "torch is a ROCm build", "cpu": "torch is a CPU-only build"}[cond.torch_cuda])
    for module, statuses in cond.imports.items():
        parts.append(f"importing `{module}` gives {_names(statuses, 'or')}")
    for module, kinds in cond.import_error.items():
        parts.append(f"importing `{module}` fails with {_names(kinds, 'or')}")
    if cond.tool_missing:
        parts.append(f"{_names(cond.tool_missing, 'and')} cannot install into the environment")
    for path, value in cond.fact.items():
        parts.append(f"the fact `{path}` is `{str(value).lower() if isinstance(value, bool) else value}`")
    if cond.marker:
        parts.append(f"the environment marker `{cond.marker}` holds")
    if cond.trace_finding:
        parts.append(f"the sample forward pass finds {_names(cond.trace_finding, 'or')}")
    if cond.sample_failed is not None:
        parts.append("a sample of the sample forward pass could not run" if cond.sample_failed else "every sample of the sample forward pass ran")
    if cond.check:
        fn = checks.get(cond.check)
        doc = paragraphs(fn.__doc__ or "")[:1] if fn else []
        first = re.match(r"(.+?)\.(?:\s|$)", doc[0]) if doc else None  # its docstring's first sentence
        parts.append(f"the named check `{cond.check}` matches" + (f" ({first.group(1)})" if first else ""))
    if cond.any:
        parts.append("any of: " + "; or ".join(_condition(c, checks) for c in cond.any))
    if cond.not_ is not None:
        parts.append(f"not ({_condition(cond.not_, checks)})")
    return "; and ".join(parts) if parts else "always"


def _names(names: list[str], joiner: str) -> str:
    quoted = [f"`{n}`" for n in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} {joiner} {quoted[-1]}"
