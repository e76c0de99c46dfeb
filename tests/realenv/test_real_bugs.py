"""Real dtype bugs of real packages, traced as a user would: `attn-doctor trace --python ENV` in an
environment with the release that has the bug names its line; the release with the fix traces
clean. The cases (package, releases, the line, the issue and the fixing commit) are in
tests/realenv/real_bugs/*/case.toml; the packages come from the registry."""

from __future__ import annotations

import pytest

from .real_bugs import load, places

CASES = load()


def _trace(doctor, realenv, case, which):
    env = realenv.get(case.env_name(which))
    run = doctor("trace", "--python", env.python, case.target, *case.args, "--json", env=env, cwd=case.folder,
                 timeout=600)
    return run, run.json()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_the_release_with_the_bug_is_named_at_its_line(doctor, realenv, case):
    run, report = _trace(doctor, realenv, case, "buggy")
    errors = [f for f in report.get("findings") or () if f.get("severity") == "error"]
    assert run.returncode == 1 and errors, "%s %s: exit %d, %s" % (
        case.package, case.buggy, run.returncode, report.get("error") or report.get("summary"))
    named = [(f["id"], p) for f in errors for p in places(f)
             if p["file"].replace("\\", "/").endswith(case.file) and case.line_contains in (p.get("source") or "")]
    assert named, "%s %s: no finding names %s `%s`; they name %s" % (
        case.package, case.buggy, case.file, case.line_contains,
        sorted({"%s %s:%s" % (f["id"], p["file"].rsplit("/", 1)[-1], p["line"]) for f in errors for p in places(f)}))
    assert case.rule in {rule for rule, _ in named}, (case.rule, named)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_the_release_with_the_fix_traces_clean(doctor, realenv, case):
    run, report = _trace(doctor, realenv, case, "fixed")
    errors = [f["message"] for f in report.get("findings") or () if f.get("severity") == "error"]
    assert run.returncode == 0 and report["status"] == "ok" and not errors, (case.package, case.fixed, errors,
                                                                              report.get("error"))
