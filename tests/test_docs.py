"""The README and docs/ as a new user reads them: short README, links that lead somewhere, the
Quickstart commands CI runs, every flag a page shows accepted by its command, and the generated
rules reference current and readable."""

from __future__ import annotations

import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest
import typer

from attn_doctor.cli import app
from attn_doctor.render.rules import REGENERATE

from test_what_users_read import problems

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 260

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]*`")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text lower-cased, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|\*|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@lru_cache(maxsize=None)
def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.M):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def test_readme_stays_short():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines (at most {README_MAX_LINES}): move the detail into docs/"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(page):
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    bad = []
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            bad.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target}: no heading with that anchor in {dest.relative_to(ROOT)}")
    assert not bad, f"{page.relative_to(ROOT)}: " + "; ".join(bad)


def test_every_docs_page_is_reachable_from_the_readme():
    reached, todo = set(), [README]
    while todo:
        page = todo.pop()
        for target in LINK.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
            dest = (page.parent / target.partition("#")[0]).resolve()
            if dest.suffix == ".md" and dest.exists() and dest not in reached and dest.parent == ROOT / "docs":
                reached.add(dest)
                todo.append(dest)
    assert set(PAGES[1:]) <= reached, f"not linked from the README or a page it links: {sorted(p.name for p in set(PAGES[1:]) - reached)}"


def test_quickstart_commands_are_where_ci_reads_them():
    """.ci/run runs the README's Quickstart commands verbatim, found by its own `quickstart` function."""
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    function = re.search(r"^quickstart\(\) \{.*?^\}", ci, re.S | re.M).group(0)
    for name, expected in (("check", "attn-doctor check"), ("test", "pytest")):
        out = subprocess.run(["bash", "-c", f"{function}\nquickstart {name}"], cwd=ROOT, capture_output=True, text=True, check=True)
        lines = [line for line in out.stdout.strip().splitlines() if not line.startswith("#")]
        assert lines and expected in lines[-1].split("#")[0], f"quickstart {name}: {out.stdout!r}"


@lru_cache(maxsize=None)
def options_of() -> dict[str, set[str]]:
    root = typer.main.get_command(app)
    out = {"": {"-h", "--help", *(o for p in root.params for o in (*p.opts, *p.secondary_opts))}}
    for name, command in root.commands.items():
        out[name] = {"-h", "--help", *(o for p in command.params for o in (*p.opts, *p.secondary_opts))}
    return out


# `attn-doctor SUB ...` or `python -m attn_doctor SUB ...`, up to the end of the command (a pipe,
# `&&`, `;`, a comment or the end of the span)
INVOCATION = re.compile(r"(?:attn-doctor|-m attn_doctor)((?: +[^\s|;&#`]+)*)")


def invocations(page: Path):
    text = page.read_text(encoding="utf-8")
    spans = [m.group(0) for m in FENCE.finditer(text)] + CODE_SPAN.findall(FENCE.sub("", text))
    for span in spans:
        for line in span.splitlines():
            for m in INVOCATION.finditer(line):
                words = m.group(1).split()
                yield line.strip(), words


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_flag_shown_is_a_flag_of_its_command(page):
    options = options_of()
    bad = []
    for line, words in invocations(page):
        command = words[0] if words and words[0] in options else ""
        for word in words[1 if command else 0:]:
            flag = word.split("=")[0].rstrip(".,:)")
            if re.fullmatch(r"--?[A-Za-z][\w-]*", flag) and flag not in options[command]:
                bad.append(f"{flag} is not an option of `attn-doctor {command}`: {line}")
    assert not bad, "\n".join(bad)


@lru_cache(maxsize=None)
def generated_rules_page() -> str:
    out = subprocess.run([sys.executable, "-m", "attn_doctor", "rules", "--markdown"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_rules_reference_is_current():
    page = ROOT / "docs" / "rules.md"
    assert page.read_text(encoding="utf-8") == generated_rules_page(), (
        f"docs/rules.md is stale (the recipes changed): regenerate it with `{REGENERATE}`"
    )


def test_rules_reference_reads_well():
    """The prose of the page (quoted messages and code aside) has no template field, no None, no
    stand-in word, no doubled space or word."""
    spans = iter(range(1_000_000))
    text = CODE_SPAN.sub(lambda _: f"code{next(spans)}", FENCE.sub("", generated_rules_page()))  # a word apiece
    bad = [f"{what}: {line[:160]}" for line in text.splitlines() for what in problems(line.replace("&lt;", "<"))]
    assert not bad, "\n".join(bad)


def test_rules_reference_has_every_rule_with_its_parts():
    from attn_doctor.rules.loader import load_recipes

    page = generated_rules_page()
    for rule in load_recipes().rules:
        section = page.split(f"\n### {rule.id} {rule.name}\n", 1)
        assert len(section) == 2, f"{rule.id} has no section"
        body = section[1].split("\n### ", 1)[0]
        assert "**Why it matters.**" in body
        assert (rule.when is None) == ("**What it checks.**" not in body), rule.id
        assert bool(rule.remedies) == ("**The fix.**" in body), rule.id
        for link in rule.links:
            assert link in body, f"{rule.id}: {link}"


def test_rules_markdown_is_the_whole_page_only():
    from typer.testing import CliRunner

    for args in (["rules", "AD301", "--markdown"], ["rules", "--markdown", "--json"]):
        out = CliRunner().invoke(app, args)
        assert out.exit_code == 2 and "--markdown prints every rule as one page" in out.output, (args, out.output)


def runnable_examples(page: Path) -> list[str]:
    """The ```python blocks marked `<!-- runs -->`: examples a reader can paste and run."""
    return re.findall(r"^<!-- runs -->\n```python\n(.*?)^```", page.read_text(encoding="utf-8"), re.S | re.M)


def test_python_api_examples_run(tmp_path):
    """In order, in one process, as a reader pastes them (the preflight example uses the traced
    model); the callback examples each in their own, where their framework is installed."""
    import importlib.util

    blocks = runnable_examples(ROOT / "docs" / "python-api.md")
    assert len(blocks) >= 6
    frameworks = ("transformers", "lightning")
    # what each framework's extra installs (the Trainer refuses to start without accelerate)
    extra = {"transformers": ("transformers", "accelerate"), "lightning": ("lightning",)}
    plain = [b for b in blocks if not any(f"import {f}" in b or f"from {f}" in b for f in frameworks)]
    scripts = ["\n".join(plain)] + [b for b in blocks if b not in plain
                                    and all(importlib.util.find_spec(m) for f in frameworks if f in b for m in extra[f])]
    outputs = []
    for script in scripts:
        (tmp_path / "example.py").write_text(script, encoding="utf-8")
        out = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, f"{script}\n--- stderr:\n{out.stderr[-3000:]}"
        outputs.append(out.stdout)
    assert "AD601 q/k reaches F.scaled_dot_product_attention at example.py:" in outputs[0]  # the trace
    assert re.search(r"AD601 error \S*example.py:\d+", outputs[0])  # preflight's error
    assert all(o.rstrip().splitlines()[-1].startswith("True") for o in outputs[1:]), outputs[1:]  # the callbacks let healthy models train


PATH_SPAN = re.compile(r"`((?:attn_doctor|tests|benchmarks|examples|recipes|docs)/[\w/.-]*)`")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_paths_named_exist(page):
    """A file or folder of the repository a page names in code (`attn_doctor/boundary/inputs.py`) is there:
    a module moved or renamed takes its mentions with it."""
    named = {p for p in PATH_SPAN.findall(page.read_text(encoding="utf-8")) if not re.search(r"\b[A-Z]{3,}\b", p)}  # not NAME.json
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert not missing, f"{page.relative_to(ROOT)} names paths that do not exist: {missing}"


SAMPLE = re.compile(r"^<!-- output: (.+?) -->\n```text\n(.*?)^```", re.S | re.M)


def _matches(sample: list[str], output: list[str]) -> bool:
    """The sample's lines in order, each equal to an output line; a line `...` stands for any run."""
    if not sample:
        return not output
    if sample[0] == "...":
        return any(_matches(sample[1:], output[i:]) for i in range(len(output) + 1))
    return bool(output) and output[0] == sample[0] and _matches(sample[1:], output[1:])


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_marked_samples_are_todays_output(page, request):
    """A ```text block under `<!-- output: ARGS -->` is what `attn-doctor ARGS` prints today, run in
    the repository (its paths shown relative to it; `...` elides lines). With --update-goldens a
    sample without `...` is rewritten as today's output (review the diff); one with `...` is said."""
    import os
    import shlex

    update = request.config.getoption("--update-goldens") or os.environ.get("ATTN_DOCTOR_UPDATE_GOLDENS") == "1"
    text = page.read_text(encoding="utf-8")
    for match in reversed(list(SAMPLE.finditer(text))):
        args, sample = match.group(1), match.group(2)
        proc = subprocess.run([sys.executable, "-m", "attn_doctor", *shlex.split(args)], cwd=ROOT, capture_output=True, text=True,
                              timeout=120, env=dict(os.environ, COLUMNS="2000", NO_COLOR="1"))
        output = proc.stdout.replace(str(ROOT) + "/", "").splitlines()
        if _matches(sample.rstrip("\n").splitlines(), output):
            continue
        if update and "..." not in sample.splitlines():
            start, end = match.span(2)
            text = text[:start] + "\n".join(output) + "\n" + text[end:]
            continue
        pytest.fail(f"{page.name}: `attn-doctor {args}` now prints:\n{proc.stdout}" + (
            "\n(the sample elides lines with `...`: edit it by hand)" if update else
            "\n(python -m pytest tests/test_docs.py --update-goldens rewrites a sample without `...`)"), pytrace=False)
    if update:
        page.write_text(text, encoding="utf-8")
