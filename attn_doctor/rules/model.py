"""The recipe schema: what a rule file may contain. Unknown keys are errors.

The msgspec structs below *are* the schema: loading validates against them, and
`attn-doctor rules --schema` prints the JSON Schema generated from them.
"""

from __future__ import annotations

from typing import Literal, Optional, Union

import msgspec

from .causes import CAUSES

Severity = Literal["error", "warning", "info"]
Area = Literal["system", "gpu", "torch", "kernels", "libraries", "dtype", "config"]
RemedyKind = Literal["pip", "config", "patch", "env", "manual"]
Safety = Literal["safe", "unsafe"]
ImportStatus = Literal["ok", "missing", "error", "crashed", "timeout", "skipped"]
ErrorKind = Literal["undefined_symbol", "missing_extension", "missing_library", "glibc", "cuda_init", "other"]


class Strict(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    pass


class Condition(Strict):
    """All given keys must hold. An unknown fact (probe not run) makes the rule `skipped`."""

    installed: list[str] = []  # every one of these distributions is installed
    installed_any: list[str] = []  # at least one is installed
    not_installed: list[str] = []
    # distribution -> PEP 440 specifier the installed version must satisfy ("" = any version)
    version: dict[str, str] = {}
    # "present": this machine's driver sees a GPU; "present_or_assumed": that, or check --gpu names
    # the job's GPU (what the environment must run on); "absent": no GPU here (unknown under --gpu)
    gpu: Optional[Literal["present", "present_or_assumed", "absent"]] = None
    capability: Optional[str] = None  # specifier over compute capability: ">=7.0,<8.0"
    torch: list[ImportStatus] = []  # torch probe status is one of these
    torch_cuda: Optional[Literal["cuda", "rocm", "cpu"]] = None  # which build of torch
    imports: dict[str, list[ImportStatus]] = {}  # module -> allowed statuses
    import_error: dict[str, list[ErrorKind]] = {}  # module -> error kinds
    tool_missing: list[str] = []  # e.g. ["pip"]
    # dotted path into Facts -> the value it must equal, e.g. {"platform.externally_managed" = true}
    fact: dict[str, Union[str, bool, int, float]] = {}
    marker: Optional[str] = None  # PEP 508 environment marker, evaluated on the target's platform
    # the sample forward pass (dtype tracer) reported a finding with one of these ids (AD6xx)
    trace_finding: list[str] = []
    # the same, for findings only a float64 shadow of the forward finds (unknown where none ran)
    trace_measured: list[str] = []
    # the sample forward pass could not run one of its samples
    sample_failed: Optional[bool] = None
    check: Optional[str] = None  # a named Python check in attn_doctor/rules/checks/
    any: list["Condition"] = []  # at least one of these holds
    not_: Optional["Condition"] = msgspec.field(default=None, name="not")


class Remedy(Strict):
    kind: RemedyKind
    summary: str
    safety: Safety = "safe"
    why_unsafe: Optional[str] = None
    # pip: one requirement and how to install it
    requirement: Optional[str] = None
    reinstall: bool = False
    no_build_isolation: bool = False
    no_deps: bool = False
    # config: which kind of file, which key, which value; "plan": key "intent" and value an intent
    # ("precision=fp16"), written in each file's own keys by its framework's reader (ConfigFile.edits)
    config: Optional[Literal["plan", "llamafactory", "transformers", "accelerate", "deepspeed"]] = None
    key: Optional[str] = None
    value: Optional[Union[str, bool, int]] = None
    # env: a variable to set
    variable: Optional[str] = None
    # any kind: a command that does it, as an argument list (never a shell string, never prose).
    # In a recipe the first word is "python" (the target interpreter), "pip" (the target's
    # installer: python -m pip, or uv pip --python where it has no pip), "uv", "attn-doctor" or a
    # system tool, and words may use {fields} and [?optional?] parts (a word left empty is left
    # out). In a report it is resolved for the target, ready to run; None where it cannot be
    # (an unknown interpreter or field).
    command: Optional[list[str]] = None
    # manual / any: the explanation, in words (code to edit goes here, never in `command`)
    detail: Optional[str] = None
    # which environments the remedy is offered for: "installable", one the user chose or activated
    # that pip or uv may install into; "not_installable", attn-doctor's own environment checked by
    # default without torch (it stays without torch) or a system Python that refuses pip. None:
    # every one. Where the facts cannot tell (a log explained), both are offered.
    for_target: Optional[Literal["installable", "not_installable"]] = None


class FixtureRef(Strict):
    """A facts document for a rule test: a recorded fixture by name, with dotted-path overrides."""

    base: Optional[str] = None
    set: dict[str, Union[str, bool, int, float, None, list, dict]] = {}
    remove: list[str] = []


Fixture = Union[str, FixtureRef]


class Fixtures(Strict):
    trigger: list[Fixture] = []
    pass_: list[Fixture] = msgspec.field(default_factory=list, name="pass")


# The root-cause classes `explain` names, with their labels: one table, in attn_doctor/rules/causes.py.
CauseClass = Literal[tuple(CAUSES)]  # type: ignore[valid-type]


class Signature(Strict):
    """An error-message signature with its own severity (e.g. a fallback warning on an error rule)."""

    pattern: str  # a Python regular expression, searched in normalised log lines
    severity: Optional[Severity] = None  # default: the rule's
    # the match counts only when the input also matches this expression somewhere (e.g. a library's path)
    context: Optional[str] = None
    # the match counts only when the traceback frame just before the message lies in a package
    # whose path matches this expression (site-packages/<name>/...): who raised it
    component: Optional[str] = None
    note: Optional[str] = None  # one line shown with the match
    # When several rules match one log, the highest priority is named first: a root cause (the
    # reason a kernel refused) over the symptom that follows it (SDPA's "No available kernel").
    priority: int = 0
    # True: the message alone identifies this rule's cause, so versions in the log never rule it
    # out. False: the message is shared by several causes and the rule's `when`, evaluated on the
    # versions and GPUs the log shows, decides between them (it can make the match "unlikely").
    decisive: bool = True
    # a named analyzer (attn_doctor/rules/analyzers.py) given the lines after the match: for
    # reports whose cause is in their structure (xformers' per-operator reasons)
    analyzer: Optional[str] = None
    # a named guard (attn_doctor/rules/analyzers.py GUARDS) that reads the match's facts and the
    # lines around it and decides whether the match counts: "an allocation as large as the GPU"
    guard: Optional[str] = None
    # False: a line holding the anchor but not the message is not tried joined with its neighbours
    # (a message wrapped over lines). For a message whose anchor is a word most lines of a training
    # log hold ("loss"): joining each would cost seconds per megabyte, and a short message seldom wraps.
    join: bool = True
    # The literals the scanner pre-filters lines with, in place of those read from the pattern,
    # for a message whose own literals are common words ("loss"): every match must contain one of
    # them (the signature fixtures, run through the scanner, show it).
    anchors: Optional[list[str]] = None
    # a named judgement of the text's own facts (attn_doctor/explaining/builds.py FACT_JUDGEMENTS):
    # the match counts only where the versions and GPUs the text names make it this cause, for a
    # message many causes give ("cuDNN ... EXECUTION_FAILED") that one of them explains when the
    # text shows it (a torch built before the GPU's CUDA)
    facts: Optional[str] = None


class SignatureFixtures(Strict):
    """Log snippets each signature-carrying rule must recognise (`match`) and must not (`no_match`)."""

    match: list[str] = []
    no_match: list[str] = []


class Rule(Strict):
    id: str  # stable, e.g. AD301
    name: str  # kebab-case slug, e.g. flash-attn-undefined-symbol
    area: Area
    severity: Severity
    title: str
    message: str  # one line, may use {evidence} fields
    explanation: str
    # None: a signature-only rule; no facts can show it, only `explain` reports it from a message
    when: Optional[Condition] = None
    # what holds when the rule passes, in one short line that reads true ("torch {torch} imports");
    # required with `when`
    pass_: Optional[str] = msgspec.field(default=None, name="pass")
    remedies: list[Remedy] = msgspec.field(default_factory=list, name="remedy")
    links: list[str] = []
    # error-message signatures (regular expressions) for `explain`
    signatures: list[Union[str, Signature]] = []
    signature_fixtures: SignatureFixtures = msgspec.field(default_factory=SignatureFixtures)
    # recognised by explain through the message catalogue (catalogue.jsonl.gz): the library sites
    # whose source check states this rule's cause name it
    catalogue: bool = False
    # recognised by explain from the shape of the whole text, not one line's words (the reading named
    # here: "notices-only", a paste of warnings and notices and nothing that failed)
    reading: Optional[str] = None
    cause: Optional[CauseClass] = None  # the root-cause class `explain` names
    # Rules this one says more specifically. One cause, one finding: where this rule and one of
    # these fire on the same evidence (in explain, the same log lines; in check, the same
    # packages), only this one is reported.
    supersedes: list[str] = []
    fixtures: Fixtures = msgspec.field(default_factory=Fixtures)


class RecipeFile(Strict):
    rules: list[Rule] = msgspec.field(default_factory=list, name="rule")
    # shared data tables named checks may read, e.g. the torch -> triton pins
    data: dict[str, dict[str, Union[str, list, dict]]] = {}
