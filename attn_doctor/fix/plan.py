"""From findings to a plan: which remedy to apply for each finding, and exactly how.

Pure apart from reading the files to edit (to show their diffs). Each finding gets its first
remedy that can be automated here; the others are listed as manual. An action is `blocked`
(with the reason) when it is unsafe and --unsafe was not given, when the environment is
externally managed (PEP 668), when there is no pip/uv, or when the facts come from a report
recorded on another machine (packages are changed only where they were probed).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from ..facts import Facts, canonical_name
from ..remedies import pip_argv
from ..report import Report, Result
from ..rules.checks.pytorch import triton_pin
from ..rules.model import Remedy
from .edits import EditError, apply_settings, settings_for, unified_diff
from .patches import PatchError, fla_states_patch, trace_patch

FIRED = ("error", "warning", "info")

# Pinned by torch (KNOWLEDGE.md section 3): asking for one of these means asking for a torch.
TORCH_PINNED = {"triton", "pytorch-triton"}


@dataclass
class Action:
    id: int
    rule: str
    kind: str  # pip | config | patch
    summary: str
    safety: str = "safe"
    why_unsafe: Optional[str] = None
    status: str = "planned"  # planned | blocked | applied | verified | unverified | failed | rolled-back | not-run
    reason: Optional[str] = None  # why blocked / failed / rolled back
    argv: list[str] = field(default_factory=list)  # pip: the exact command
    requirement: Optional[str] = None
    files: list[str] = field(default_factory=list)
    diff: str = ""
    settings: dict[str, Any] = field(default_factory=dict)  # config: what is written
    config: Optional[str] = None  # config kind
    note: Optional[str] = None
    patch_file: Optional[str] = None  # patch: where the .patch was (or will be) written
    output: Optional[str] = None  # the tail of pip's output when it failed
    # pip: what the installer resolved it would install, before anything runs ({name, version,
    # installed: the version there now, or None for a package new to the environment})
    would_install: list[dict] = field(default_factory=list)
    resolve_error: Optional[str] = None  # why it could not be resolved in advance
    # Not shown: the new bytes of each file, in plan order.
    new_bytes: dict[str, bytes] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict:
        out = asdict(self)
        out.pop("new_bytes")
        return {k: v for k, v in out.items() if v not in (None, [], {}, "")}


@dataclass
class ManualItem:
    rule: str
    status: str
    summary: str
    detail: Optional[str] = None
    command: Optional[list[str]] = None  # what to run by hand, for the target (an argument list)


@dataclass
class Plan:
    actions: list[Action] = field(default_factory=list)
    manual: list[ManualItem] = field(default_factory=list)
    source: str = "probed"
    python: str = ""
    # The interpreter acted on and why that one (facts.Target: --python, the active venv or conda
    # env, the doctor's own); None for a recorded report, whose packages are not changed here.
    target: Any = None
    recorded_on: Optional[str] = None  # a recorded report: the host it was recorded on
    installer: Optional[str] = None  # what runs the pip actions: "uv" or "pip" (None: no pip action)
    # fix --trace: the dtype path is the user's model, traced again after its patches to verify them
    traced: bool = False

    @property
    def runnable(self) -> list[Action]:
        return [a for a in self.actions if a.status == "planned"]


@dataclass
class Options:
    unsafe: bool = False
    apply_patch: bool = False
    only: list[str] = field(default_factory=list)
    skip: list[str] = field(default_factory=list)
    patch_dir: Optional[Path] = None
    installer: str = "auto"  # auto (uv where found, else pip) | uv | pip
    from_report: bool = False  # set by build_plan: the facts were recorded elsewhere


def build_plan(report: Report, options: Options, data: Optional[dict] = None, recipes=None) -> Plan:
    """The plan for a check's report. Every config edit is judged before it is offered (judge.py),
    with `recipes` (default: the shipped ones): a change any rule says fails is not planned."""
    from .judge import Judge

    if recipes is None:
        from ..rules.loader import load_recipes

        recipes = load_recipes()
    judge = Judge(report, recipes)
    facts = report.facts
    plan = Plan(source=report.source, python=facts.platform.python_executable,
                target=facts.target if report.source == "probed" else None,
                recorded_on=(facts.platform.hostname or "another machine") if report.source == "facts-file" else None)
    options.from_report = report.source == "facts-file"
    only = {r.upper() for r in options.only}
    skip = {r.upper() for r in options.skip}
    pending_text: dict[str, bytes] = {}  # file -> its bytes after the actions planned so far
    for result in report.results:
        if result.status not in FIRED:
            continue
        if (only and result.rule.upper() not in only) or result.rule.upper() in skip:
            continue
        if result.status == "info" and result.evidence.get("elsewhere"):
            # a note about another environment (the job's, which may have what this one lacks):
            # nothing here is changed for it
            first = result.remedies[0] if result.remedies else None
            plan.manual.append(ManualItem(result.rule, result.status, "Nothing changed: " + (result.message or result.title),
                                          None, None))
            continue
        if _resolved_by_earlier(result, plan, pending_text, judge):
            continue
        action = None
        for remedy in result.remedies:
            action = _action_for(len(plan.actions) + 1, result, remedy, facts, options, pending_text, data or {}, judge)
            if action is None:
                continue
            if action.status == "blocked":
                # A later remedy may be possible where this one is not (fla: the source patch when
                # the torch upgrade cannot be done); an unsafe block is final only at the end.
                later = _first_possible(result, remedy, facts, options, pending_text, data or {}, len(plan.actions) + 1, judge)
                if later is not None:
                    action = later
            break
        if action is None:
            first = result.remedies[0] if result.remedies else None
            plan.manual.append(
                ManualItem(result.rule, result.status, first.summary if first else result.title, first.detail if first else None,
                           first.command if first else None)
            )
            continue
        plan.actions.append(action)
    pip_argvs = [a.argv for a in plan.actions if a.kind == "pip" and a.argv]
    if pip_argvs:
        plan.installer = "uv" if Path(pip_argvs[0][0]).name == "uv" else "pip"
    return plan


def _resolved_by_earlier(result: Result, plan: Plan, pending_text: dict, judge) -> bool:
    """A config finding that the edits planned before it already resolve in every file it names: no
    action of its own (a second edit of the same key could undo the first); the action that
    resolves it says so."""
    files = result.evidence.get("config_files") or []
    if not files or not any(r.kind == "config" for r in result.remedies) or not all(f in pending_text for f in files):
        return False
    if not all(judge.resolved(result.rule, f, pending_text[f]) for f in files):
        return False
    for action in reversed(plan.actions):
        if action.kind == "config" and set(files) & set(action.files):
            action.note = (action.note + "; " if action.note else "") + f"also resolves {result.rule}"
            break
    return True


def _first_possible(result, after, facts, options, pending_text, data, next_id, judge) -> Optional[Action]:
    remedies = result.remedies[result.remedies.index(after) + 1 :]
    for remedy in remedies:
        action = _action_for(next_id, result, remedy, facts, options, dict(pending_text), data, judge)
        if action is not None and action.status == "planned":
            return _action_for(next_id, result, remedy, facts, options, pending_text, data, judge)
    return None


def _action_for(
    number: int, result: Result, remedy: Remedy, facts: Facts, options: Options, pending_text: dict, data: dict, judge=None
) -> Optional[Action]:
    base = dict(id=number, rule=result.rule, summary=remedy.summary, safety=remedy.safety, why_unsafe=remedy.why_unsafe)
    if remedy.kind == "pip" and remedy.requirement:
        return _pip_action(Action(kind="pip", **base), remedy, facts, options, data)
    if remedy.kind == "config" and remedy.config and remedy.key:
        files = result.evidence.get("config_files") or []
        if not files:
            return None  # a generic config advice (no --config file named): manual
        return _config_action(Action(kind="config", config=remedy.config, **base), remedy, files, facts, options, pending_text,
                              result.evidence, judge)
    if remedy.kind == "patch":
        return _patch_action(Action(kind="patch", **base), result, facts, options, pending_text)
    return None


def _block(action: Action, reason: str) -> Action:
    action.status = "blocked"
    action.reason = reason
    return action


# ---------------------------------------------------------------- pip


def _pip_action(action: Action, remedy: Remedy, facts: Facts, options: Options, data: dict) -> Action:
    try:
        req = Requirement(remedy.requirement)
    except InvalidRequirement:
        return _block(action, f"the recipe's requirement {remedy.requirement!r} is not valid")
    name = canonical_name(req.name)
    if name in TORCH_PINNED and remedy.reinstall:
        pass  # a repair (AD008): the release that was installed goes back as it was; torch is not moved
    elif name in TORCH_PINNED and _is_installed_torch_pin(req, facts, data):
        # the triton this torch pins (AD201's "reinstall the pin"): installing it keeps torch as it is
        action.note = f"the triton torch {facts.version_of('torch')} pins"
    elif name in TORCH_PINNED:
        torch_req = _torch_for_triton(req, data.get("torch_triton", {}))
        if torch_req is None:
            return _block(action, f"{req} is pinned by torch and no torch release in the pin table brings it")
        action.note = f"triton is pinned by torch: {req} means {torch_req}"
        remedy = Remedy(**{**_fields(remedy), "requirement": torch_req})
        req = Requirement(torch_req)
        name = "torch"
    if name == "torch" and action.safety != "unsafe":
        action.safety = "unsafe"
        action.why_unsafe = "a torch upgrade changes the CUDA build; every compiled extension (flash-attn, xformers...) must match it"
    action.requirement = str(req)
    if action.safety == "unsafe" and not options.unsafe:
        return _block(action, f"unsafe ({action.why_unsafe or 'see the rule'}); run with --unsafe to allow it")
    if options.from_report:
        return _block(action, "the facts come from a recorded report: packages are changed only in a probed environment (drop --from-report, use --python)")
    if facts.platform.externally_managed:
        return _block(
            action,
            f"{facts.platform.python_executable} is externally managed (PEP 668): attn-doctor will not install into a system Python; use a virtual environment",
        )
    tool = fix_installer(facts, options.installer)
    if tool is None:
        return _block(action, "neither pip nor uv is available for the target interpreter" if options.installer == "auto"
                      else f"--installer {options.installer}: {options.installer} is not available for the target interpreter")
    action.argv = pip_argv(remedy, facts, tool) or []
    return action


def fix_installer(facts: Facts, choice: str = "auto") -> Optional[str]:
    """The installer fix runs: uv where it is available (it links files from its cache: a much
    shorter window in which the package is half there than pip's uninstall-then-copy), else pip."""
    uv = facts.tools.get("uv")
    pip = facts.tools.get("pip")
    has_uv, has_pip = bool(uv and uv.present), pip is None or pip.present
    if choice == "uv":
        return "uv" if has_uv else None
    if choice == "pip":
        return "pip" if has_pip else None
    return "uv" if has_uv else "pip" if has_pip else None


def _fields(remedy: Remedy) -> dict:
    return {f: getattr(remedy, f) for f in remedy.__struct_fields__}


def _is_installed_torch_pin(req: Requirement, facts: Facts, data: dict) -> bool:
    """req asks for the triton the installed torch pins (installing it leaves torch alone)."""
    pin = triton_pin(facts, data)
    return pin is not None and (req.specifier == pin or bool(_versions_of(req) and all(pin.contains(v, prereleases=True) for v in _versions_of(req))))


def _versions_of(req: Requirement) -> list[Version]:
    """The exact versions an ==/=== requirement names (none for ranges)."""
    out = []
    for spec in req.specifier:
        if spec.operator in ("==", "===") and not spec.version.endswith(".*"):
            try:
                out.append(Version(spec.version))
            except InvalidVersion:
                return []
        else:
            return []
    return out


def _torch_for_triton(req: Requirement, pins: dict) -> Optional[str]:
    """triton>=3.0 -> torch>=2.4: the oldest torch whose pinned triton satisfies the requirement."""
    best = None
    for torch_mm, triton in pins.items():
        candidates = triton if isinstance(triton, list) else [triton]
        try:
            ok = any(req.specifier.contains(Version(c if c.count(".") >= 2 else c + ".0"), prereleases=True) for c in candidates)
            key = Version(torch_mm)
        except InvalidVersion:
            continue
        if ok and (best is None or key < best):
            best = key
    return f"torch>={best}" if best else None


# ---------------------------------------------------------------- config


def _config_action(
    action: Action, remedy: Remedy, files: list[str], facts: Facts, options: Options, pending_text: dict, evidence: dict,
    judge=None
) -> Action:
    from ..probes.configs import ConfigReadError, load_document

    lf_version = facts.version_of("llamafactory")
    diffs, by_hand = [], []
    for file in files:
        path = Path(file)
        try:
            current = pending_text.get(file)
            if current is None:
                current = path.read_bytes()
            doc = _load_bytes(path, current) if file in pending_text else load_document(path)
            if remedy.config == "plan":
                settings = plan_settings(file, (evidence.get("intents") or {}).get(file) or str(remedy.value), facts, doc, lf_version)
            else:
                settings = settings_for(remedy.config, remedy.key, remedy.value, doc, lf_version)
            new = apply_settings(path, current, settings)
            refusal = judge.verdict(action.rule, file, pending_text.get(file), new) if judge is not None else None
            if refusal is not None:
                raise EditError(refusal)
        except (OSError, EditError, ConfigReadError) as exc:
            # One file that must be edited by hand does not hold back the others of the same remedy.
            by_hand.append(str(exc) if str(exc).startswith(str(path)) else f"{path}: {exc}")
            continue
        action.files.append(file)
        action.settings.update(settings)
        action.new_bytes[file] = new
        pending_text[file] = new
        diffs.append(unified_diff(file, current, new))
    if by_hand and not action.files:
        return _block(action, "; ".join(by_hand))
    if by_hand:
        action.note = "by hand: " + "; ".join(by_hand)
    action.diff = "".join(diffs)
    if action.settings.get("flash_attn") == "auto":
        action.note = (action.note + "; " if action.note else "") + "flash_attn: auto hands attention to transformers (SDPA or eager): it avoids FA2, it does not fix dtypes"
    if not action.diff:
        return _block(action, "already set as the remedy asks")
    return action


def plan_settings(file: str, intent: str, facts: Facts, doc, lf_version) -> dict:
    """A plan remedy (an intent such as precision=fp16) in this file's own keys: what its
    framework's reader wrote for it when the check read the file; LLaMA-Factory's flash_attn spelt
    as the installed version wants it."""
    config = next((c for c in facts.configs if c.path == file), None)
    edit = dict(config.edits.get(intent) or {}) if config is not None else {}
    if not edit:
        raise EditError(f"{file}: not a value attn-doctor can set in this framework's keys; change it by hand as the remedy says")
    if config.kind == "llamafactory" and "flash_attn" in edit:
        edit.update(settings_for("llamafactory", "flash_attn", edit["flash_attn"], doc, lf_version))
    return edit


def _load_bytes(path: Path, data: bytes):
    from .edits import _parse

    return _parse(path, data)


# ---------------------------------------------------------------- patches


def _patch_action(action: Action, result: Result, facts: Facts, options: Options, pending_text: dict) -> Optional[Action]:
    try:
        if result.rule == "AD402":
            patch = fla_states_patch(facts)
            action.note = "edits the installed fla package (undone by any reinstall of fla)"
        else:
            patch = trace_patch(result, facts)
    except PatchError as exc:
        return _block(action, str(exc))
    if patch is None:
        return None
    patches = patch if isinstance(patch, list) else [patch]
    action.files = [file for file, _, _ in patches]
    for file, new, _ in patches:
        action.new_bytes[file] = new
    action.diff = "".join(diff for _, _, diff in patches)
    if result.rule == "AD402":
        if action.safety == "unsafe" and not options.unsafe:
            return _block(action, f"unsafe ({action.why_unsafe or 'see the rule'}); run with --unsafe to allow it")
        return action
    if not options.apply_patch:
        action.status = "blocked"
        action.reason = "a patch to your source: written as a .patch file; --apply-patch applies it"
    return action
