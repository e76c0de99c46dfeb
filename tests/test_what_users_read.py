"""Every text a rule or remedy shows, and every command it gives, against every report we have.

Rendered against each recorded report in tests/fixtures/facts/ (and each rule's own trigger
fixtures), against a report with every optional fact missing, and for every explain match over the
whole corpus (tests/corpus/): no template field left or filled with words, no `None`, no doubled
space or word; every command an argument list that runs as it is for the target environment.
"""

from __future__ import annotations

import io
import re
import shlex
import sys
from functools import lru_cache
from pathlib import Path

import pytest
from packaging.requirements import InvalidRequirement, Requirement

from attn_doctor.facts import Facts
from attn_doctor.remedies import Target
from attn_doctor.rules import templates
from attn_doctor.rules.conditions import base_evidence
from attn_doctor.diagnosis.engine import evaluate_rule, remedies
from attn_doctor.rules.fixtures import build_facts
from attn_doctor.rules.loader import load_recipes

ROOT = Path(__file__).resolve().parents[1]
FACTS = sorted((ROOT / "tests" / "fixtures" / "facts").glob("*.json"))
RECIPES = load_recipes()

# Unresolved template syntax, stand-ins for a value, a Python None, two spaces, a word twice
# ("torch torch"), a label followed by the words that used to stand in for its value.
BAD = {
    "a template field": re.compile(r"\{[A-Za-z_]\w*\}|\[\?|\?\]"),
    # (Python's own <locals>, <lambda>, <module> in a quoted qualified name are not stand-ins)
    "a stand-in": re.compile(r"(?<![\w:])<(?!(?:locals|lambda|module|genexpr|listcomp|dictcomp|setcomp)>)[A-Za-z_][\w ]*>|cu<"
                             r"|\b(?:PACKAGE|PACKAGES|PKG|NAME|VERSION|PATH_TO\w*)\b"),
    "None": re.compile(r"\bNone\b"),
    "a doubled space": re.compile(r"\S  +\S"),
    "a doubled word": re.compile(r"(?<![\w.-])([A-Za-z][\w-]*) \1\b(?![\w.-])", re.I),
    "a value said in words": re.compile(r"\b([\w-]+) the installed \1\b|\bthis interpreter\b"),
}
# System tools a remedy may name as its first word (besides an interpreter, uv and attn-doctor).
SYSTEM_TOOLS = {"nvidia-smi", "nvcc", "ldd", "conda", "dmesg"}


def problems(text: str) -> list[str]:
    return [what for what, rx in BAD.items() if rx.search(text or "")]


def command_problems(argv: list[str]) -> list[str]:
    out = []
    line = shlex.join(argv)
    if shlex.split(line) != argv:
        out.append("does not parse back")
    head = argv[0]
    if not (Path(head).is_absolute() or head in ("uv", "attn-doctor") or head in SYSTEM_TOOLS or Path(head).name == "uv"):
        out.append(f"starts with {head!r}")
    if Path(head).is_absolute() and Path(head).name != "uv" and argv[1:2] == ["-m"] and argv[2:3] == ["pip"] or \
            Path(head).name == "uv" and argv[1:2] == ["pip"]:
        verb = argv[3] if argv[1] == "-m" else argv[2]
        if verb == "install":
            args, skip = [], False
            for word in argv[4 if argv[1] == "-m" else 3:]:
                if skip:
                    skip = False
                elif word in ("--python", "--index-url", "--extra-index-url", "-c", "--no-binary", "--only-binary"):
                    skip = True
                elif not word.startswith("-"):
                    args.append(word)
            if not args:
                out.append("installs nothing")
            for req in args:
                try:
                    Requirement(req)
                except InvalidRequirement as exc:
                    out.append(f"requirement {req!r}: {exc}")
    return out


def check_remedy(where: str, remedy, bad: list[str]) -> None:
    for field in ("summary", "detail", "requirement"):
        for what in problems(getattr(remedy, field) or ""):
            bad.append(f"{where} {field}: {what}: {getattr(remedy, field)!r}")
    if remedy.command is not None:
        for what in command_problems(remedy.command):
            bad.append(f"{where} command: {what}: {shlex.join(remedy.command)}")


def check_result(where: str, rule, evidence: dict, target: Target, bad: list[str], message: str | None = None) -> None:
    if message is not None:
        unknown = templates.required(rule.message) - {templates._key(k) for k, v in evidence.items() if templates.known(v)}
        if unknown:
            bad.append(f"{where} message needs {sorted(unknown)} outside an optional part")
        for what in problems(message):
            bad.append(f"{where} message: {what}: {message!r}")
    for remedy_t in rule.remedies:
        unknown = templates.required(remedy_t.summary) - {templates._key(k) for k, v in evidence.items() if templates.known(v)}
        if unknown:
            bad.append(f"{where} remedy summary needs {sorted(unknown)} outside an optional part: {remedy_t.summary!r}")
    for remedy in remedies(rule, evidence, target):
        check_remedy(where, remedy, bad)


def reports() -> list[tuple[str, Facts]]:
    out = [(p.stem, build_facts(p.stem)) for p in FACTS]
    out.append(("no-optional-facts", Facts()))
    for rule in RECIPES.rules:
        for fixture in rule.fixtures.trigger:
            out.append((f"{rule.id}-trigger", build_facts(fixture)))
    return out


def _matrix_verdict(rule) -> dict:
    """A rule every signature of which the support matrix judges is shown only with the matrix's
    verdict, which always carries its reason and remedy (explaining/matrix_judge.py): those fields, as
    one real verdict words them."""
    if not all(str(getattr(sig, "guard", None) or "").startswith("matrix") for sig in rule.signatures):
        return {}
    return {"support_reason": "FlashAttention 2 (ROCm, Composable Kernel backend) is built for gfx90a, gfx942, not "
                              "for this GPU's gfx908",
            "support_remedy": "Use PyTorch SDPA's math kernel, which runs on gfx908", "support_fact": "gfx908"}


def test_every_rule_and_remedy_reads_true_on_every_report():
    bad: list[str] = []
    for name, facts in reports():
        target = Target.of(facts)
        for rule in RECIPES.rules:
            if rule.when is None:
                check_result(f"{name} {rule.id}", rule, {**base_evidence(facts), **_matrix_verdict(rule)}, target, bad)
                continue
            result = evaluate_rule(rule, facts, RECIPES.data)
            where = f"{name} {rule.id}"
            if result.status in ("error", "warning", "info"):
                check_result(where, rule, {**base_evidence(facts), **result.evidence}, target, bad, result.message or "")
                for remedy in result.remedies:
                    check_remedy(where, remedy, bad)
            else:
                if rule.signatures:  # explain shows its remedies with whatever a log gives
                    check_result(where, rule, {**base_evidence(facts), **_matrix_verdict(rule)}, target, bad)
                if result.status == "pass" and result.message:
                    for what in problems(result.message):
                        bad.append(f"{where} pass line: {what}: {result.message!r}")
    assert not bad, f"{len(bad)} problems:\n" + "\n".join(sorted(set(bad))[:60])


@lru_cache(maxsize=1)
def corpus_reports():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import score_explain
    from attn_doctor.explaining.core import explain

    cases, _ = score_explain.load_corpus()
    return [(case.id, explain(io.BytesIO(case.text.encode("utf-8")), RECIPES, kind="text", python=sys.executable))
            for case in cases]


def test_every_explain_match_over_the_corpus_reads_true():
    bad: list[str] = []
    for case_id, report in corpus_reports():
        for m in report.matches:
            where = f"{case_id} {m.rule}"
            for what in problems(m.message or ""):
                bad.append(f"{where} message: {what}: {m.message!r}")
            for remedy, command in zip(m.remedies, m.commands):
                check_remedy(where, remedy, bad)
                assert command == (shlex.join(remedy.command) if remedy.command else None)
    assert not bad, f"{len(bad)} problems:\n" + "\n".join(sorted(set(bad))[:60])


def test_commands_name_the_target_interpreter_never_a_bare_pip():
    seen = 0
    for name, facts in reports()[: len(FACTS)]:
        for rule in RECIPES.rules:
            for remedy in remedies(rule, base_evidence(facts), Target.of(facts)):
                if remedy.command and "pip" in remedy.command[:3]:
                    seen += 1
                    assert remedy.command[0] in (facts.platform.python_executable, (facts.tools.get("uv") and facts.tools["uv"].path) or "uv")
    assert seen > 20
    for _, report in corpus_reports():
        for m in report.matches:
            for remedy in m.remedies:
                if remedy.command and "pip" in remedy.command[:3]:
                    assert remedy.command[0] == str(Path(sys.executable).absolute()) or Path(remedy.command[0]).name == "uv"


def test_a_target_without_pip_gets_uv_pip_with_its_python(tmp_path):
    rule = next(r for r in RECIPES.rules if r.id == "AD301")
    (remedy,) = remedies(rule, {"flash_attn": "2.7.4"}, Target("/envs/uv/bin/python", "uv", "/usr/bin/uv"))
    assert remedy.command == ["/usr/bin/uv", "pip", "install", "--python", "/envs/uv/bin/python", "--reinstall-package",
                              "flash-attn", "--no-deps", "--no-build-isolation", "flash-attn==2.7.4"]
    (remedy,) = remedies(rule, {}, Target(None))
    assert remedy.command is None  # no interpreter known: no command, rather than a bare `python`


# -- one cause, one finding ------------------------------------------------------------------

FA_LINE = "ImportError: /x/site-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: undefined symbol: _ZN3c104cuda9SetDeviceEi"


def _explain(text: str):
    from attn_doctor.explaining.core import explain

    return explain(io.BytesIO(text.encode()), RECIPES, kind="text", python=sys.executable)


def test_explain_reports_one_finding_for_one_flash_attn_library_line():
    report = _explain(FA_LINE)
    assert [m.rule for m in report.matches] == ["AD301"]
    (remedy,) = report.matches[0].remedies
    assert remedy.summary == "Reinstall flash-attn built for the installed torch"
    assert remedy.command[1:] == ["-m", "pip", "install", "--force-reinstall", "--no-deps", "--no-build-isolation", "flash-attn"]


def test_the_general_rule_stays_for_lines_the_specific_one_does_not_explain():
    xformers = ('Traceback (most recent call last):\n  File "/app/run.py", line 3, in <module>\n    import xformers.ops\n'
                "ImportError: /venv/lib/python3.10/site-packages/xformers/_C.so: undefined symbol: _ZN2at4_ops5zeros4callEv")
    report = _explain(FA_LINE + "\n\n" + xformers)
    assert [m.rule for m in report.matches] == ["AD301", "AD312"]
    ad312 = report.matches[1]
    assert [e.line for e in ad312.evidence] == [6]  # the flash-attn line is AD301's alone
    assert ad312.remedies[0].command[-1] == "xformers"  # read again from the line it kept


def test_which_library_note_only_when_the_message_does_not_say():
    named = _explain("ImportError: /venv/lib/python3.10/site-packages/apex/amp_C.so: undefined symbol: _ZN3c104cuda9SetDeviceEi")
    (m,) = named.matches
    assert not any("does not say which library" in n for n in m.notes)
    bare = _explain("ImportError: undefined symbol: _ZN3c104cuda9SetDeviceEi")
    (m,) = bare.matches
    assert any("does not say which library" in n for n in m.notes)


def test_check_reports_the_smoke_failure_of_an_extension_that_does_not_load_once():
    from attn_doctor.core import diagnose

    results = {r.rule: r for r in diagnose(build_facts("h100-xformers"), RECIPES).results}
    assert results["AD312"].status == "error"
    assert results["AD701"].status == "skipped" and "AD312" in results["AD701"].reason


def test_a_smoke_failure_of_another_backend_is_still_its_own_finding():
    from attn_doctor.diagnosis.engine import evaluate

    facts = build_facts("h100-xformers")
    broken = next(r for r in facts.smoke.results if r.backend.startswith("sdpa"))
    broken.status, broken.error = "error", "RuntimeError: CUDA error: an illegal memory access was encountered"
    results = {r.rule: r for r in evaluate(RECIPES, facts)}
    assert results["AD312"].status == "error" and results["AD701"].status == "error"


def test_a_supersedes_naming_no_rule_is_a_recipe_error(tmp_path):
    from attn_doctor.rules.loader import RecipeError

    for path in (ROOT / "recipes").glob("*.toml"):
        (tmp_path / path.name).write_text(path.read_text().replace('supersedes = ["AD312"]', 'supersedes = ["AD999"]'))
    with pytest.raises(RecipeError, match="AD999"):
        load_recipes(tmp_path)


# -- JSON carries the argument list ----------------------------------------------------------

def test_json_reports_carry_each_command_as_an_argument_list(monkeypatch, tmp_path):
    import json

    from typer.testing import CliRunner

    from attn_doctor.cli import app

    monkeypatch.setenv("ATTN_DOCTOR_CACHE_DIR", str(tmp_path))
    out = CliRunner().invoke(app, ["check", "--from-report", str(ROOT / "tests/fixtures/facts/h100-xformers.json"), "--json"]).stdout
    (ad312,) = [r for r in json.loads(out)["results"] if r["rule"] == "AD312"]
    assert ad312["remedies"][0]["command"] == ["/tmp/xv/bin/python", "-m", "pip", "install", "--force-reinstall", "--no-deps",
                                               "--no-build-isolation", "xformers"]
    out = CliRunner().invoke(app, ["explain", FA_LINE, "--json"]).stdout
    (match,) = json.loads(out)["matches"]
    assert match["remedies"][0]["command"][0] == str(Path(sys.executable).absolute())
    assert match["commands"] == [shlex.join(match["remedies"][0]["command"])]


def test_a_config_finding_names_its_file_and_nothing_more(monkeypatch, tmp_path):
    import json

    from typer.testing import CliRunner

    from attn_doctor.cli import app

    monkeypatch.setenv("ATTN_DOCTOR_CACHE_DIR", str(tmp_path))
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("flash_attn: fa2  # FA2\nbf16: true\n")
    out = CliRunner().invoke(app, ["check", "--from-report", str(ROOT / "tests/fixtures/facts/t4.json"), "--config", str(cfg), "--json"]).stdout
    messages = {r["rule"]: r["message"] for r in json.loads(out)["results"] if r["status"] in ("error", "warning")}
    assert messages["AD502"].startswith(f"{cfg}: `flash_attn: fa2` (LLaMA-Factory) on Tesla T4")
    assert messages["AD501"].startswith(f"{cfg}: `bf16: true` (LLaMA-Factory) means bf16 lora training (the frozen base computing in bf16, the lora adapters in float32) on Tesla T4")


def test_uv_commands_upgrade_only_the_packages_named():
    # uv's --upgrade (and --reinstall) act on every package it resolves, torch included; pip's only
    # on those named. A remedy run through uv must keep pip's meaning.
    from attn_doctor.remedies import Target, _with_target

    uv = Target("/v/bin/python", "uv", "/usr/bin/uv")
    assert _with_target(["pip", "install", "--upgrade", "x-transformers>=1.30.2"], uv) == [
        "/usr/bin/uv", "pip", "install", "--python", "/v/bin/python", "--upgrade-package", "x-transformers", "x-transformers>=1.30.2"]
    argv = _with_target(["pip", "install", "--force-reinstall", "--no-deps", "triton==3.6.0"], uv)
    assert "--reinstall-package" in argv and "--force-reinstall" not in argv and "--upgrade" not in argv
    assert _with_target(["pip", "install", "--upgrade", "flash-attn"], Target("/v/bin/python", "pip")) == [
        "/v/bin/python", "-m", "pip", "install", "--upgrade", "flash-attn"]


def _with_x_transformers_sample(version, library="x_transformers"):
    """h100's facts with x-transformers `version` installed and its sample's promotion (AD601) seen
    inside `library`'s code, as the real sample forward pass reports it."""
    from attn_doctor.facts import DtypePath, Package

    facts = build_facts("h100")
    facts.packages["x-transformers"] = Package(version=version)
    site = "/venv/lib/python3.11/site-packages/%s/attend.py" % library
    facts.dtype_path = DtypePath(status="ok", dtype="bfloat16", verdict="error", findings=[{
        "id": "AD601", "severity": "error", "sample": "x_transformers",
        "message": "q float32 reaches F.scaled_dot_product_attention at %s:215" % site,
        "sink": {"file": site, "line": 215, "called_from": {"library": library}}}])
    return facts


def test_a_known_bad_release_covers_the_promotion_the_sample_saw_in_its_code():
    # one cause, one finding: the upgrade's finding, as severe as the failure the sample forward pass saw
    from attn_doctor.diagnosis.engine import evaluate

    results = {r.rule: r for r in evaluate(RECIPES, _with_x_transformers_sample("1.30.1"))}
    assert results["AD401"].status == "error" and results["AD401"].evidence["covers"] == "AD601"
    assert results["AD601"].status == "skipped" and "AD401" in results["AD601"].reason
    # a fixed release: the promotion is its own finding
    results = {r.rule: r for r in evaluate(RECIPES, _with_x_transformers_sample("1.30.2"))}
    assert results["AD401"].status == "pass" and results["AD601"].status == "error"
    # a promotion in another library's code is not x-transformers' to cover
    results = {r.rule: r for r in evaluate(RECIPES, _with_x_transformers_sample("1.30.1", library="fla"))}
    assert results["AD401"].status == "warning" and "covers" not in results["AD401"].evidence
    assert results["AD601"].status == "error" and results["AD601"].evidence["packages"] == "flash-linear-attention"
    # its remedy says whose code it is; a promotion in the user's own code gets no such line
    (remedy,) = results["AD601"].remedies
    assert remedy.detail.startswith("The attention call is in flash-linear-attention's code"), remedy.detail
    facts = _with_x_transformers_sample("1.30.2")
    facts.dtype_path.findings[0]["sink"].pop("called_from")
    (remedy,) = {r.rule: r for r in evaluate(RECIPES, facts)}["AD601"].remedies
    assert not remedy.detail, remedy.detail
