"""The core of `explain`: input in, explained matches out. Returns values; never prints, never exits."""

from __future__ import annotations

import re
import shlex
import time
from typing import Any, Callable, Optional

from ..facts import Facts, canonical_name, distribution_of
from ..report import now
from ..rules.conditions import Evaluator, Unknown, base_evidence
from ..rules import templates
from ..diagnosis.engine import evaluate_rule, remedies as fill_remedies
from ..rules.loader import Recipes
from ..rules.model import Condition, Rule
from ..rules import causes
from .report import Candidate, EvidenceLine, ExplainReport, InputInfo, LiveCheck, Match, mark_alternatives, summarise
from .scan import PACKAGE_PATH, ScanResult, Scanner, SignatureHits, compiled_signatures
from .versions import LogVersions, gpu_table_from
from . import analysed, builds, catalogue, stated

SEVERITY_RANK = {"error": 0, "warning": 1, "info": 2}
LIKELIHOOD_RANK = {"confirmed": 0, "possible": 1, "unlikely": 2}


class LogEvaluator(Evaluator):
    """Evaluates a rule's `when` on the partial facts a log gives: what the log does not show is
    unknown, never "not installed"."""

    def _seen(self, names):
        missing = [n for n in names if self.facts.version_of(n) is None]
        return Unknown(f"the log does not show the version of {', '.join(missing)}") if missing else None

    def _installed(self, names):
        return self._seen(names) or super()._installed(names)

    def _installed_any(self, names):
        found = [n for n in names if self.facts.version_of(n)]
        return super()._installed_any(found) if found else Unknown(f"the log shows none of {', '.join(names)}")

    def _not_installed(self, names):
        return Unknown("a log cannot show that a package is absent")

    def _version(self, specs):
        return self._seen(list(specs)) or super()._version(specs)

    def _fact(self, wanted):
        return Unknown("the log does not show " + ", ".join(wanted))

    def _marker(self, text):
        return Unknown("the log does not show the platform")

    def _tool_missing(self, names):
        return Unknown("the log does not show the tools")

    def _imports(self, wanted):
        return Unknown("a log does not show the import probes' results")

    def _import_error(self, wanted):
        return Unknown("a log does not show the import probes' results")

    def _check(self, name):
        # Named checks read probed facts; on a log's partial facts "not found" means "not shown".
        try:
            verdict = super()._check(name)
        except Exception:  # noqa: BLE001 - a check written for probed facts may trip on a log's partial facts
            verdict = False
        return verdict if verdict is True else Unknown(f"the log does not show the facts the check {name} needs")


def _why_false(rule: Rule, facts: Facts, data: dict) -> str:
    """Which part of the rule's condition the log's versions contradict, in words."""
    when = rule.when
    for key in when.__struct_fields__:
        value = getattr(when, key)
        if value in (None, [], {}):
            continue
        sub = Condition(**{key: value}) if key != "not_" else Condition(not_=value)
        ev = LogEvaluator(facts, _checks(), data)
        try:
            verdict = ev.evaluate(sub)
        except Exception:  # noqa: BLE001
            continue
        if verdict is False:
            if key == "version":
                return "; ".join(f"the log shows {n} {facts.version_of(n)}, not {spec}" for n, spec in value.items() if facts.version_of(n))
            if key == "capability":
                caps = ", ".join(f"sm{c.replace('.', '')}" for c in facts.gpu_capabilities() or [])
                return f"the log shows a GPU of {caps}, not compute capability {value}"
            return f"the log's facts contradict `{key}`"
    return "the log's versions do not fit this cause"


def _checks():
    from ..rules.checks import CHECKS

    return CHECKS


def _derived(captures: dict[str, str], evidence: dict[str, Any], versions: LogVersions, live: Optional[Facts]) -> dict[str, str]:
    """Facts a capture implies: a demangled symbol and which side is off, the wheel that fits."""
    from .. import failures

    out: dict[str, str] = {}
    symbol = captures.get("symbol")
    if symbol and symbol.startswith("_Z"):
        abi, abi_source = (live.torch.cxx11_abi, "probed") if live is not None and live.torch.cxx11_abi is not None else versions.torch_abi()
        out.update(failures.undefined_symbol_evidence(symbol, abi))
        if abi is not None:
            out["torch_abi"] = f"{'C++11 ABI' if abi else 'old ABI'} ({abi_source})"
    lib = captures.get("library")
    if lib:
        out["library"] = lib
    package = _package(captures, versions)
    if package:
        out["packages"] = package
    glibc = captures.get("glibc")
    if glibc:
        out["symbol"] = f"GLIBC_{glibc}"
    out.update(failures.qkv_cast(captures.get("query_dtype"), captures.get("key_dtype"), captures.get("value_dtype")))
    cuda = evidence.get("torch_cuda")
    extra = failures.fa4_extra(cuda if cuda not in (None, "?") else None)
    if extra:
        out["fa4_extra"] = extra
    wheel = failures.wheel_tag(
        str(evidence.get("flash-attn") or "") or None if evidence.get("flash-attn") not in (None, "?") else None,
        evidence.get("torch") if evidence.get("torch") not in (None, "?") else None,
        cuda if cuda not in (None, "?") else None,
        live.torch.cxx11_abi if live is not None else versions.torch_abi()[0],
        (live.platform.python_version if live is not None else (versions.python[-1] if versions.python else None)) or None,
    )
    if wheel:
        out["wheel"] = wheel
    return out


def _package(captures: dict[str, str], versions: LogVersions) -> Optional[str]:
    """The distribution a remedy must reinstall or rebuild, from what the text shows: a package it
    names, the frame that raised, the library that failed (its site-packages folder, else its file's
    module name), the wheel pip was building. None when the text shows none."""
    named = captures.get("packages")
    if named:
        return ", ".join(dict.fromkeys(distribution_of(p) for p in re.split(r"[,\s]+", named) if p))
    lib = captures.get("library")
    if lib:
        m = PACKAGE_PATH.search(lib)
        parts = lib.replace("\\", "/").rsplit("/", 2)
        module = m.group("name") if m else re.split(r"[.]", parts[-1], 1)[0]
        if module.startswith("_") and len(parts) > 1:
            module = parts[-2]  # a package's private extension (vllm/_C.abi3.so): the package's folder
        if module and not module.startswith("lib") and module != "torch":
            return distribution_of(module)
    component = captures.get("component")
    if component and component != "torch":
        return distribution_of(component)
    if versions.building:
        return canonical_name(versions.building[-1])
    return None


def _scanner(recipes: Recipes, force_regex: bool) -> tuple[list[Rule], Scanner]:
    """The compiled signatures and the scanner of a recipe set, built once per set (compiling
    every signature and its pre-filter costs far more than explaining one message)."""
    cache = recipes.__dict__.setdefault("_explain_scanners", {})
    if force_regex not in cache:
        sig_rules = [r for r in recipes.rules if r.signatures]
        cache[force_regex] = (sig_rules, Scanner(compiled_signatures(sig_rules), gpu_table_from(recipes.data),
                                                 force_regex=force_regex))
    return cache[force_regex]


def explain(
    source,
    recipes: Recipes,
    *,
    kind: str = "file",
    path: Optional[str] = None,
    live: Optional[Facts] = None,
    progress: Optional[Callable[[int], None]] = None,
    force_regex: bool = False,
    python: Optional[str] = None,
    default_python: Optional[str] = None,
    exclude: frozenset[str] = frozenset(),
) -> ExplainReport:
    """Scan `source` (a path, or a binary stream) for every known signature and explain each.

    Remedies' commands are resolved for the environment explain speaks for: the probed one
    (`live`), else the interpreter the user named (`python`), else the environment the log's
    traceback shows where it is here, else `default_python` (the one check would diagnose) where it
    has torch, else "the python of your training environment" (explaining/target.py), said in a note.

    When no known signature matches, the known case of the corpus the text resembles (a calibrated
    similarity search) is offered as a possible cause; `exclude` names corpus cases to leave out of
    that search (a leave-one-out measurement)."""
    from ..remedies import Target
    from .target import command_target

    started = time.perf_counter()
    sig_rules, scanner = _scanner(recipes, force_regex)
    scan = scanner.scan(source, progress=progress, keep_all_lines=kind == "text")
    report = ExplainReport(
        created=now(),
        input=InputInfo(source=kind, path=path, bytes=scan.bytes, lines=scan.lines, engine=scan.engine),
        versions=scan.versions.summary(),
        notes=list(scan.notes),
        checked=live is not None,
    )
    if scan.bytes == 0:
        report.notes.append("the input is empty: nothing to explain")
    if live is not None:
        target = Target.of(live)
    else:
        target, why = command_target(python, default_python, scan.versions.prefixes)
        if why and scan.hits:
            report.notes.append(why)
    report.matches = _matches(scan, sig_rules, recipes, live, target)

    def weak(m) -> bool:  # a possible cause said as a note (a NaN loss told without the run's precision)
        return m.severity == "info" and m.likelihood == "possible"

    real = [m for m in report.matches if not m.harmless and not weak(m)]
    by_frame = frame_readings(scan)
    if real and all(m.rule in by_frame for m in real):
        # only readings of who raised it (an error class raised in Triton's frames): the message of
        # a library's own check, read whole, says more; it goes first, those readings after it
        found = catalogue.finding(scan, recipes, live, target, {m.rule for m in report.matches}, among_read=True)
        if found is not None and found.likelihood == "confirmed":
            report.matches.insert(0, found)
    if not real:
        found = catalogue.finding(scan, recipes, live, target, {m.rule for m in report.matches})
        if found is not None and not found.harmless:
            # a library's own message, read whole, goes before a possible cause said as a note
            report.matches.insert(next((i for i, m in enumerate(report.matches) if weak(m)), len(report.matches)), found)
        elif found is not None and not report.matches:
            report.matches.append(found)
        notices = _notices_only(scan, recipes, live, target) if found is None and not report.matches else None
        if notices is not None:
            report.matches.append(notices)  # lines that failed nowhere resemble no failure
        elif found is None or found.harmless:
            resembled = _resembled(scan, recipes, live, target, exclude)
            if resembled is not None:
                report.matches.append(resembled)
            elif found is None:
                report.candidates = closest(scan.candidate_lines, sig_rules, exclude={m.rule for m in report.matches})
    report.summary = summarise(mark_alternatives(report.matches))
    # With --check, a cause this environment does not show (live "absent") is not a problem to fix here.
    report.exit_code = 1 if any(not m.harmless and m.likelihood != "unlikely" and m.severity in ("error", "warning")
                                and (m.live is None or m.live.status != "absent") for m in report.matches) else 0
    report.input.seconds = round(time.perf_counter() - started, 3)
    return report


def frame_readings(scan: ScanResult) -> set[str]:
    """The rules the scan read only from who raised a line (a generic signature limited to one
    package's frames, such as any TypeError raised in Triton's code), not from what it says."""
    return {r for r in {h.signature.rule for h in scan.hits.values()}
            if all(h.signature.component is not None and h.signature.priority < 0
                   for h in scan.hits.values() if h.signature.rule == r)}


def _matches(scan: ScanResult, rules: list[Rule], recipes: Recipes, live: Optional[Facts], target) -> list[Match]:
    from ..remedies import Target

    by_rule: dict[str, list] = {}
    weighed = []  # (report's first line, past its last, the rules its analyzer weighed, those it named)
    for idx, hits in scan.hits.items():
        sig = hits.signature
        if sig.context is not None and idx not in scan.contexts_seen:
            continue  # e.g. an x-transformers signature in a log that never mentions x-transformers
        by_rule.setdefault(sig.rule, []).append(hits)
        derived_hits = analysed.readings(hits)
        for derived in derived_hits:
            by_rule.setdefault(derived.signature.rule, []).append(derived)
        weighed += analysed.report(hits, derived_hits)
    analysed.drop_weighed(by_rule, weighed)
    log_facts = scan.versions.to_facts()
    rules_by_id = {r.id: r for r in recipes.rules}
    _supersede(by_rule, rules_by_id)
    out = []
    for rule_id, all_hits in by_rule.items():
        rule = rules_by_id[rule_id]
        captures: dict[str, str] = {}
        evidence_lines: list[EvidenceLine] = []
        notes: list[str] = []
        severity = None
        # A signature's note speaks for the lines it was the most specific signature of: the
        # library-less "undefined symbol" pattern's "does not say which library" is not said of a
        # line a pattern that captured the library matched too.
        best: dict[int, int] = {}
        for hits in all_hits:
            for e in hits.evidence:
                best[e.line] = max(best.get(e.line, hits.signature.priority), hits.signature.priority)
        for hits in sorted(all_hits, key=lambda h: h.evidence[0].line if h.evidence else 0):
            for k, v in hits.groups.items():
                captures.setdefault(k, " ".join(v.split()) if isinstance(v, str) else v)  # a log's own spacing
            evidence_lines += [EvidenceLine(line=e.line, text=e.text) for e in hits.evidence]
            sev = hits.signature.severity or rule.severity
            severity = sev if severity is None or SEVERITY_RANK[sev] < SEVERITY_RANK[severity] else severity
            speaks = not hits.evidence or any(best[e.line] == hits.signature.priority for e in hits.evidence)
            if hits.signature.note and speaks and hits.signature.note not in notes:
                notes.append(hits.signature.note)
        seen_lines, unique = set(), []
        for e in sorted(evidence_lines, key=lambda e: e.line):
            if e.line not in seen_lines:
                seen_lines.add(e.line)
                unique.append(e)
        occurrences = max(h.count for h in all_hits)
        decisive = any(h.signature.decisive for h in all_hits)
        priority = max(h.signature.priority for h in all_hits)
        # With --check, a cause this environment does not show is the log's, not this environment's: its
        # remedy is written from the log's facts (a "reinstall for this torch" would name the wrong one).
        live_check = _live(rule, live, recipes) if live is not None else None
        here = live if live_check is None or live_check.status != "absent" else None
        evidence: dict[str, Any] = dict(base_evidence(here if here is not None else log_facts))
        if here is None:
            for key in list(evidence):
                if evidence[key] == "?" or key == "python":
                    evidence.pop(key)
        evidence.update({k.replace("-", "_"): v for k, v in list(evidence.items())})
        likelihood, reason, fits = _likelihood(rule, decisive, log_facts, recipes)
        judged = stated.judge(captures, log_facts.gpu_capabilities() or [], log_facts.version_of("torch"), recipes.data, decisive)
        if judged is not None:
            if judged[0] is not None:
                likelihood, reason = judged[0], judged[1]
            captures.update({k: v for k, v in judged[2].items() if k not in captures})
        if "support_class" in captures:
            # a refusal the support matrix judges: its reason, or no match at all (the matrix never guesses)
            from . import matrix_judge

            verdict = matrix_judge.judge(captures, log_facts, scan.versions.amd)
            if verdict is None:
                continue
            captures.update(verdict)
            likelihood = "confirmed"
            reason = f"the support matrix says: {verdict['support_reason']}"
        same = builds.torch_side_clears_the_build(rule, captures, evidence) or builds.torch_has_the_kernels(rule, captures, log_facts, recipes.data)
        if same:
            likelihood, reason = "unlikely", same
        facts = builds.read_by_facts(rule, captures, {h.signature.facts for h in all_hits}, log_facts, scan.versions, recipes.data)
        if facts == ():
            continue  # every line is a message many causes give, and the text's facts make it none of this rule's
        if facts:
            likelihood, reason = facts
        evidence.update(fits)
        evidence.update(captures)
        evidence.update(_derived(captures, evidence, scan.versions, here))
        evidence.update({k.replace("-", "_"): v for k, v in list(evidence.items())})
        message = templates.fill(rule.message, evidence) if templates.complete(rule.message, evidence) else None
        remedies = fill_remedies(rule, evidence, target if here is not None or live is None else Target(None))

        match = Match(
            rule=rule.id,
            name=rule.name,
            area=rule.area,
            severity=severity or rule.severity,
            cause=rule.cause,
            cause_label=causes.label(rule.cause),
            harmless=rule.cause == "harmless",
            title=rule.title,
            message=message,
            explanation=rule.explanation.strip(),
            occurrences=occurrences,
            evidence=unique[:8],
            captures={k: str(v) for k, v in {**captures, **_derived(captures, evidence, scan.versions, here)}.items()},
            notes=notes,
            likelihood=likelihood,
            likelihood_reason=reason,
            priority=priority,
            remedies=remedies,
            commands=[shlex.join(r.command) if r.command else None for r in remedies],
            links=list(rule.links),
        )
        if live_check is not None:
            match.live = live_check
        out.append(match)
    out = _one_per_cause(out, {rule_id for rule_id, hits in by_rule.items() if any(_is_matrix(h) for h in hits)})
    out.sort(key=lambda m: (m.harmless, m.likelihood == "unlikely", -m.priority, LIKELIHOOD_RANK[m.likelihood],
                            SEVERITY_RANK[m.severity], m.evidence[0].line if m.evidence else 0, m.rule))
    return out


def _known_cases(recipes: Recipes):
    """The known-case index shipped beside the recipes, loaded once per recipe set; None where the
    folder has none (someone's own --recipes)."""
    cache = recipes.__dict__.setdefault("_explain_scanners", {})
    if "known_cases" not in cache:
        from pathlib import Path

        from . import neighbours

        folders = {Path(p).parent for p in recipes.sources.values()}
        paths = [f / neighbours.INDEX_NAME for f in folders if (f / neighbours.INDEX_NAME).is_file()]
        try:
            cache["known_cases"] = neighbours.Index.load(paths[0]) if len(paths) == 1 else None
        except (OSError, ValueError, KeyError, EOFError):
            cache["known_cases"] = None  # a damaged index: explain without it
    return cache["known_cases"]


def _notices_only(scan: ScanResult, recipes: Recipes, live: Optional[Facts], target) -> Optional[Match]:
    """The notices-only reading of a short paste (explaining/notices.py) as a harmless finding, or None."""
    from .notices import notice_lines

    rule = next((r for r in recipes.rules if r.reading == "notices-only"), None)
    found = notice_lines(scan.whole_paste, recipes.data.get("notices_only", {})) if rule is not None else None
    if not found:
        return None
    from .matched import rule_match
    from .report import EvidenceLine
    from .scan import EVIDENCE_KEEP, _shorten

    what = f"{len(found)} line{'s' if len(found) > 1 else ''}"
    match = rule_match(
        rule, live if live is not None else scan.versions.to_facts(), target, captures={"what": what}, priority=-9,
        likelihood="confirmed", reason="every message of the text is a warning or a notice and no line says something failed",
        evidence=[EvidenceLine(line=n, text=_shorten(t)) for t, n in found[:EVIDENCE_KEEP]],
    )
    match.occurrences = len(found)
    return match


def _resembled(scan: ScanResult, recipes: Recipes, live: Optional[Facts], target, exclude: frozenset[str]) -> Optional[Match]:
    """The cause of the known case the text resembles, as a possible match, or None."""
    if not scan.candidate_lines:
        return None  # nothing to compare: the index is not even loaded
    index = _known_cases(recipes)
    if index is None:
        return None
    from ..rules.analyzers import fact_judged
    judged = fact_judged(recipes.rules)
    near = index.nearest(scan.candidate_lines, exclude=exclude, judged=judged)
    if near is None:
        return None
    rule = next((recipes.get(r) for r in near.rules if recipes.get(r) is not None), None)
    if rule is None:
        return None
    from .matched import rule_match
    from .report import Resemblance

    return rule_match(
        rule, live if live is not None else scan.versions.to_facts(), target, priority=-9, likelihood="possible",
        reason=(f"no known message matched; the text resembles a known case, {near.source} "
                f"(similarity {near.score:.0f}/100), whose cause this was"),
        resembles=Resemblance(case=near.case, source=near.source, family=near.family, score=near.score,
                              line=near.line, example=near.example),
    )


def _supersede(by_rule: dict[str, list[SignatureHits]], rules_by_id: dict[str, Rule]) -> None:
    """One cause, one finding: the lines a matched rule explains more specifically (its
    `supersedes`, read with a priority at least as high) are taken from the rules it supersedes; a rule left with no line is not reported,
    one left with others is read again from those (its captures: the library they name)."""
    for rule_id in list(by_rule):
        for other in rules_by_id[rule_id].supersedes if rule_id in by_rule else ():  # gone: superseded on all its lines
            if other not in by_rule or other == rule_id:
                continue
            taken: dict[int, int] = {}  # line -> the priority it was read with
            for h in by_rule[rule_id]:
                for e in h.evidence:
                    taken[e.line] = max(taken.get(e.line, h.signature.priority), h.signature.priority)
            kept = []
            for hits in by_rule[other]:
                # a generic reading (a lower priority) never takes a line from a specific one
                left = [e for e in hits.evidence if e.line not in taken or taken[e.line] < hits.signature.priority]
                if len(left) == len(hits.evidence):
                    kept.append(hits)
                elif left:
                    m = hits.signature.regex.search(left[0].text)
                    groups = {k: v for k, v in m.groupdict().items() if v} if m else {}
                    kept.append(SignatureHits(hits.signature, count=max(len(left), hits.count - len(hits.evidence) + len(left)),
                                              evidence=left, groups=groups))
            if kept:
                by_rule[other] = kept
            else:
                del by_rule[other]
    # A refusal judged by the support matrix (a generic reading of any refusal line) on a line that a
    # specific rule of the same cause explains at least as severely is the same finding said twice.
    # (A matrix verdict more severe than the specific rule replaces it once the matrix has judged:
    # _one_per_cause.)
    specific: dict[tuple, int] = {}  # (cause, line) -> the highest severity of a specific reading
    for rule_id, hits_list in by_rule.items():
        for h in hits_list:
            if not _is_matrix(h):
                for e in h.evidence:
                    key = (rules_by_id[rule_id].cause, e.line)
                    specific[key] = max(specific.get(key, 0), _SEVERITY.get(str(rules_by_id[rule_id].severity), 0))
    for rule_id in list(by_rule):
        cause, mine = rules_by_id[rule_id].cause, _SEVERITY.get(str(rules_by_id[rule_id].severity), 0)
        kept = [h for h in by_rule[rule_id] if not (_is_matrix(h) and h.evidence and all(
            specific.get((cause, e.line), 0) >= mine for e in h.evidence))]
        if kept:
            by_rule[rule_id] = kept
        else:
            del by_rule[rule_id]


_SEVERITY = {"error": 3, "warning": 2, "info": 1}


def _is_matrix(hits) -> bool:
    return str(hits.signature.guard or "").startswith("matrix")


def _one_per_cause(out: list, matrix_rules: set) -> list:
    """A specific finding whose lines a more severe support-matrix verdict of the same cause explains
    gives way to it (one finding per cause)."""
    verdicts = [m for m in out if m.rule in matrix_rules and m.evidence]
    if not verdicts:
        return out
    keep = []
    for m in out:
        lines = {e.line for e in m.evidence}
        beaten = m.rule not in matrix_rules and lines and any(
            v.cause == m.cause and lines <= {e.line for e in v.evidence}
            and _SEVERITY.get(str(v.severity), 0) > _SEVERITY.get(str(m.severity), 0) for v in verdicts)
        if not beaten:
            keep.append(m)
    return keep


def _likelihood(rule: Rule, decisive: bool, log_facts: Facts, recipes: Recipes) -> tuple[str, str, dict]:
    """How well the log's own versions and GPUs fit a match, and why.

    Unknown is never a contradiction: a log that does not print a version leaves the match as the
    message made it. A decisive message (one that only this cause produces) is never ruled out by
    the versions either: they may come from another process or machine of the same log, and the
    contradiction is said. Only a message several causes share is ruled "unlikely" by them."""
    if rule.when is None:
        if not decisive:
            return "possible", "the message fits this cause, though others give it too", {}
        return "confirmed", "the message itself identifies this cause", {}
    ev = LogEvaluator(log_facts, _checks(), recipes.data)
    try:
        verdict = ev.evaluate(rule.when)
    except Exception:  # noqa: BLE001 - a check written for probed facts may trip on a log's partial facts
        verdict = Unknown("the rule's condition could not be evaluated on the log")
    if verdict is True:
        return "confirmed", "the message and the versions in the log fit this cause", dict(ev.evidence)
    if verdict is False:
        why = _why_false(rule, log_facts, recipes.data)
        if decisive:
            return "possible", f"the message identifies this cause, though {why} (another process or machine in the same log?)", {}
        return "unlikely", f"this message has other causes too, and {why}", {}
    if decisive:
        return "confirmed", "the message itself identifies this cause", {}
    return "possible", f"the message fits; {verdict.reason} to confirm it", {}


def _live(rule: Rule, facts: Facts, recipes: Recipes) -> LiveCheck:
    if rule.when is None:
        return LiveCheck(status="unknown", reason="no probe can show this; it lives in the code or the run's settings")
    result = evaluate_rule(rule, facts, recipes.data)
    if result.status in ("error", "warning", "info"):
        return LiveCheck(status="present", message=result.message)
    if result.status == "pass":
        return LiveCheck(status="absent", reason="this environment does not show it now")
    last = (result.traceback or "").strip().splitlines()[-1:]
    return LiveCheck(status="unknown", reason=result.reason or (f"the check crashed: {last[0]}" if last else None))


# -- nothing matched: the closest known messages -----------------------------------------------

_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")


def _tokens(text: str) -> set[str]:
    return {t.lower() for t in _TOKEN.findall(text)}


def closest(lines: list[str], rules: list[Rule], exclude: set[str] = frozenset(), limit: int = 3) -> list[Candidate]:
    """Known messages (the rules' signature fixtures) that share the most words with the input's lines."""
    import difflib

    examples = [(r, ex) for r in rules if r.id not in exclude for ex in r.signature_fixtures.match]
    ex_tokens = [(r, ex, _tokens(ex)) for r, ex in examples]
    pairs = []  # (word overlap, rule, example, line)
    for line in lines[-CANDIDATE_SCAN:]:
        lt = _tokens(line)
        if len(lt) < 2:
            continue
        for rule, ex, et in ex_tokens:
            if et:
                overlap = len(lt & et) / len(lt | et)
                if overlap >= 0.12:
                    pairs.append((overlap, rule, ex, line))
    # the character-level ratio is costly: only for the pairs the word overlap ranks first
    # (0.4 x ratio cannot lift a pair above one whose overlap is 0.4 / 0.6 higher)
    pairs.sort(key=lambda p: -p[0])
    best: dict[str, Candidate] = {}
    for overlap, rule, ex, line in pairs[:CANDIDATE_PAIRS]:
        ratio = difflib.SequenceMatcher(None, line[:300].lower(), ex[:300].lower(), autojunk=False).ratio()
        score = round(0.6 * overlap + 0.4 * ratio, 3)
        if score >= 0.25 and (rule.id not in best or best[rule.id].score < score):
            best[rule.id] = Candidate(rule=rule.id, title=rule.title, score=score, line=line[:300], example=ex.strip()[:300])
    return sorted(best.values(), key=lambda c: -c.score)[:limit]


CANDIDATE_SCAN = 200
CANDIDATE_PAIRS = 40
