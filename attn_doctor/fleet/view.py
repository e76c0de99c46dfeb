"""A report read for the fleet at the decoder's speed: typed, bounded, and its fleet view typed too.

A fleet reads thousands of reports, so the bounds (attn_doctor/boundary/inputs.py) are enforced where they
cost least: the size before decoding (read_bounded); the types, and with them the depth of every
typed part, by msgspec's typed decoding; what the fleet never shows (a result's evidence,
remedies, links, traceback) is skipped by the decoder, its JSON checked and no object made
(deeper than the interpreter's recursion limit: refused); the depth and number of values
(check_structure) only in the few free-form parts the fleet reads (the tracer's findings, a
config's settings).

Each report is decoded twice, both typed, into structs generated from the report's own (Family):
the fleet view (VIEW: less what differs per node by design, digest.py says what), whose hash is
the report's digest, and the rest (REST: just what the view leaves out and the fleet reads, the
timings and a result's title, to check their types). A field added to the report is in one of
them without a word here. What a type cannot say is done on the decoded view: launcher variables
out of the env, probes and results keyed by name (their order is no difference), free-form parts
stripped of volatile keys. Only one report per group is kept (compressed) and read whole.
"""

from __future__ import annotations

import hashlib
import typing
import zlib
from collections.abc import Mapping
from typing import Any, Iterator, Optional, Union

import msgspec

from ..boundary.inputs import InputError, check_structure, decode_json
from ..report import SCHEMA_ID, SCHEMA_VERSION, Report, Result, Tool
from ..facts import Gpu, Platform, TorchDevice

# Fields dropped wherever they appear (and any field ending in _ms: a timing); digest.py says why.
VOLATILE_KEYS = frozenset(
    {"duration_s", "hostname", "uuid", "serial", "pci_bus_id", "rel_err", "rel_err_grad", "cached", "computed_by", "waited_s",
     "device_index", "group_seconds", "group_phases", "capability_cached", "key", "stderr"}
)
# Per struct: the only fields the view keeps (the report's envelope, a result's verdict), or more to drop.
KEEP_ONLY: dict[type, frozenset] = {
    # summary and exit_code: for the node's member, never in the digest (typed_view leaves them out)
    Report: frozenset({"schema_", "schema_version", "tool", "facts", "results", "summary", "exit_code"}),
    Tool: frozenset({"version"}),
    Result: frozenset({"rule", "status", "message"}),
}
ENVELOPE = ("schema_", "schema_version")  # in the view to be checked, never part of its digest
DROP: dict[type, frozenset] = {Gpu: frozenset({"index"}), TorchDevice: frozenset({"index"})}  # which GPU of the node


def _volatile(name: str) -> bool:
    return name in VOLATILE_KEYS or name.endswith("_ms")


def _is_struct(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, msgspec.Struct)


class Family:
    """Structs derived from the report's own, less the fields `leave_out(struct, field)` names,
    nested structs derived the same way: a field added to the report is in every family at once."""

    def __init__(self, suffix: str, leave_out, envelope: bool = False):
        self.suffix, self.leave_out, self.envelope = suffix, leave_out, envelope
        self._types: dict[type, type] = {}

    def of(self, struct: type) -> type:
        if struct in self._types:
            return self._types[struct]
        fields = []
        for f in msgspec.structs.fields(struct):
            if self.leave_out(struct, f.name):
                continue
            if self.envelope and struct is Report and f.name in ENVELOPE:  # as found (absent: None), to say what a file is
                fields.append((f.name, Any, msgspec.field(default=None, name=f.encode_name)))
                continue
            factory = self.of(f.default_factory) if _is_struct(f.default_factory) else f.default_factory
            default = msgspec.field(name=f.encode_name) if f.required else (
                msgspec.field(default_factory=factory, name=f.encode_name) if f.default is msgspec.NODEFAULT
                else msgspec.field(default=f.default, name=f.encode_name))
            fields.append((f.name, self._type(f.type), default))
        derived = msgspec.defstruct(f"{struct.__name__}{self.suffix}", fields, kw_only=True)
        self._types[struct] = derived
        return derived

    def _type(self, tp: Any) -> Any:
        if _is_struct(tp):
            return self.of(tp)
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin is list:
            return list[self._type(args[0])]
        if origin is dict:
            return dict[args[0], self._type(args[1])]
        if origin is Union:
            return Union[tuple(self._type(a) for a in args)]
        return tp  # scalars, Literal, Annotated constraints, Any: as in the report


# What the fleet reads of a report: all of it but what it never shows (a result's evidence,
# remedies, links and traceback: skipped by the decoder, their JSON checked, no object made).
UNREAD = {Result: frozenset({"evidence", "remedies", "links", "traceback"})}
READ = Family("Read", lambda struct, name: name in UNREAD.get(struct, ()))
# The fleet view: less what differs per node by design (the host name stays, for the node's
# member: typed_view blanks it).
def _out_of_view(struct: type, name: str) -> bool:
    return ((_volatile(name) and not (struct is Platform and name == "hostname"))
            or name in DROP.get(struct, ()) or (struct in KEEP_ONLY and name not in KEEP_ONLY[struct]))


VIEW = Family("View", _out_of_view, envelope=True)


def _rest_below(tp: Any, seen: frozenset = frozenset()) -> bool:
    """Whether a value of type `tp` holds fields the fleet reads that the view leaves out."""
    if _is_struct(tp):
        return tp not in seen and any(
            (name not in UNREAD.get(tp, ())) and (_out_of_view(tp, name) or _rest_below(ftype, seen | {tp}))
            for name, ftype in ((f.name, f.type) for f in msgspec.structs.fields(tp)))
    return any(_rest_below(a, seen) for a in typing.get_args(tp))


_FIELD_TYPES = {}


def _field_type(struct: type, name: str) -> Any:
    if struct not in _FIELD_TYPES:
        _FIELD_TYPES[struct] = {f.name: f.type for f in msgspec.structs.fields(struct)}
    return _FIELD_TYPES[struct][name]


# The rest: what the fleet reads that the view leaves out (timings, host names, a result's title),
# and the way to it. Decoded beside the view, so that every report is checked in every field the
# fleet reads (its type, its presence where required), whichever of its group describes the group.
REST = Family("Rest", lambda struct, name: name in UNREAD.get(struct, ())
              or not (_out_of_view(struct, name) or _rest_below(_field_type(struct, name))))


def view_type(struct: type) -> type:
    return VIEW.of(struct)


# Where a struct type holds free-form (Any) values: [(field, how to reach them, the plan below)].
Plan = list[tuple[str, str, list]]
_PLANS: dict[type, Plan] = {}


def _has(tp: Any, test) -> bool:
    return test(tp) or any(_has(a, test) for a in typing.get_args(tp))


def _free_below(tp: Any, seen: frozenset = frozenset()) -> bool:
    """Whether a value of type `tp` can hold a free-form (Any) value, in nested structs too."""
    if tp is Any:
        return True
    if _is_struct(tp):
        return tp not in seen and any(_free_below(f.type, seen | {tp}) for f in msgspec.structs.fields(tp))
    return any(_free_below(a, seen) for a in typing.get_args(tp))


def plan_of(struct: type) -> Plan:
    if struct in _PLANS:
        return _PLANS[struct]
    plan: Plan = []
    _PLANS[struct] = plan  # a struct that contains itself stops here
    for f in msgspec.structs.fields(struct):
        tp = f.type
        if not _free_below(tp):
            continue
        if not _has(tp, _is_struct):
            plan.append((f.name, "any", []))  # builtins all the way down: bounded, stripped whole
            continue
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        origin = typing.get_origin(tp)
        if _is_struct(tp) or (origin is Union and len(args) == 1 and _is_struct(args[0])):
            plan.append((f.name, "struct", plan_of(tp if _is_struct(tp) else args[0])))
        elif origin is list and _is_struct(args[0]):
            plan.append((f.name, "list", plan_of(args[0])))
        elif origin is dict and _is_struct(args[1]):
            plan.append((f.name, "dict", plan_of(args[1])))
        else:  # a shape this walker does not know: the report's schema grew one; teach it here
            raise TypeError(f"{struct.__name__}.{f.name}: free-form values inside {tp!r}")
    return plan


def free_form(obj: Any, plan: Plan) -> Iterator[tuple[Any, str, Any]]:
    """(holder, field, value) for every free-form value under a decoded struct `obj`."""
    for name, how, sub in plan:
        value = getattr(obj, name, None)
        if value is None:
            continue
        if how == "any":
            yield obj, name, value
        elif how == "struct":
            yield from free_form(value, sub)
        else:
            for item in value if how == "list" else value.values():
                if item is not None:
                    yield from free_form(item, sub)


REPORT_READ = READ.of(Report)
REPORT_DECODER = msgspec.json.Decoder(REPORT_READ)

REPORT_VIEW = view_type(Report)
VIEW_DECODER = msgspec.json.Decoder(REPORT_VIEW)
VIEW_PLAN = plan_of(REPORT_VIEW)
REST_DECODER = msgspec.json.Decoder(REST.of(Report))
if plan_of(REST.of(Report)):  # free-form values outside the view would go unbounded: keep them in it
    raise TypeError("free-form (Any) fields outside the fleet view")

# Environment variables that differ per rank or per node by design.
PER_RANK_ENV = frozenset(
    {"RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "NODE_RANK", "LOCAL_WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE",
     "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "HOSTNAME", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"}
)
PER_RANK_ENV_PREFIXES = ("SLURM_", "SLURMD_", "TORCHELASTIC_")


def read_report(raw: bytes) -> tuple[Any, str]:
    """A report's bytes (already size-bounded) as its decoded view (a REPORT_VIEW, which also
    carries who the node is: host name, env, summary, exit code) and its fleet digest; or
    ValueError saying in one line why not: not JSON, not an attn-doctor report, a schema version
    this doctor does not read, a field the fleet reads of another type (the view's and the rest's,
    decoded beside it), or free-form parts nested deeper than MAX_DEPTH or holding more than
    MAX_VALUES values."""
    try:
        view = VIEW_DECODER.decode(raw)
    except msgspec.ValidationError as exc:
        try:
            envelope = _envelope(raw)  # the refusal's words: every decode of the bytes is bounded alike
        except RecursionError:
            raise ValueError(TOO_DEEP) from None
        raise ValueError(_refusal(envelope) or f"invalid report: {str(exc)[:300]}") from None
    except (msgspec.DecodeError, RecursionError):
        raise ValueError(_not_json(raw)) from None
    refusal = _refusal(view)
    if refusal:
        raise ValueError(refusal)
    try:
        REST_DECODER.decode(raw)  # checked, then dropped: the digest leaves it out, the group's report has it
    except msgspec.ValidationError as exc:
        raise ValueError(f"invalid report: {str(exc)[:300]}") from None
    except RecursionError:
        raise ValueError(TOO_DEEP) from None
    _bounded(view, VIEW_PLAN)
    return view, _digest(view)


def read_full(raw: bytes) -> tuple[Any, str]:
    """read_report, and the report as the fleet reads it whole (a REPORT_READ: a Report less what
    the fleet never shows): for the report that describes a group, a rank's, a Ray node's."""
    _, digest = read_report(raw)
    return REPORT_DECODER.decode(raw), digest


def _bounded(decoded: Any, plan: Plan) -> None:
    try:
        check_structure([value for _, _, value in free_form(decoded, plan)])
    except InputError as exc:
        raise ValueError(str(exc)) from None


def _not_json(raw: bytes) -> str:
    try:
        decode_json(raw)  # for the located message: line, column, what is there
    except InputError as exc:
        return str(exc)
    return "not valid JSON"


TOO_DEEP = "not a report this doctor reads: nested deeper than a report is"


def _envelope(raw: bytes) -> Any:
    try:
        return VIEW_DECODER.decode(raw)
    except msgspec.ValidationError:
        try:
            return msgspec.json.decode(raw, type=_Envelope)
        except msgspec.ValidationError:
            return None


class _Envelope(msgspec.Struct):
    schema_: Any = msgspec.field(default=None, name="schema")
    schema_version: Any = None


def _refusal(view: Any) -> Optional[str]:
    """Why a decoded envelope is not that of a report this doctor reads, or None."""
    if view is None:
        return "not an attn-doctor report (not a JSON object; expected one from `check --json`)"
    if view.schema_ != SCHEMA_ID:
        return f"not an attn-doctor report (schema {view.schema_!r}; expected {SCHEMA_ID!r} from `check --json`)"
    version = view.schema_version
    if not isinstance(version, int) or isinstance(version, bool) or version > SCHEMA_VERSION:
        return f"report schema version {version!r} is newer than this attn-doctor understands ({SCHEMA_VERSION})"
    return None


def typed_view(view: Any) -> dict:
    """A decoded view made the fleet view: {"tool": version, "facts": view struct, "results": {rule:
    verdict}}; encoded with sorted keys it is the same for two reports exactly when their fleet
    views are equal. `view` keeps who the node is (its host name, its env) for its member."""
    for holder, name, value in free_form(view, VIEW_PLAN):
        setattr(holder, name, strip(value))
    facts = msgspec.structs.replace(
        view.facts,
        platform=msgspec.structs.replace(view.facts.platform, hostname=""),
        env={k: v for k, v in view.facts.env.items() if k not in PER_RANK_ENV and not k.startswith(PER_RANK_ENV_PREFIXES)},
        probes={p.name: p for p in view.facts.probes},  # by name: the order the probes finished in is no difference
    )
    return {"tool": view.tool.version, "facts": facts, "results": {r.rule: r for r in view.results}}


def strip(value: Any) -> Any:
    """A free-form value less its volatile keys, wherever they are."""
    if isinstance(value, dict):
        return {k: strip(v) for k, v in value.items() if not (isinstance(k, str) and _volatile(k))}
    if isinstance(value, list):
        return [strip(v) for v in value]
    return value


def _digest(view: Any) -> str:
    # deterministic: dict keys sorted (a report's dicts may come in any order), struct fields in their own
    return hashlib.sha256(msgspec.json.encode(typed_view(view), order="deterministic")).hexdigest()[:16]


def view_digest(raw: bytes) -> str:
    """A short, stable hash of a valid report's fleet view (sorted keys: the same view always hashes the same)."""
    return _digest(VIEW_DECODER.decode(raw))


def fleet_view(raw: bytes) -> dict:
    """The fleet view as JSON builtins, shaped for differences (digest.differences): probes and
    results keyed by name, without the name again inside."""
    out = msgspec.to_builtins(typed_view(VIEW_DECODER.decode(raw)))
    for keyed, name in (("probes", "name"), (None, "rule")):
        for entry in (out["facts"][keyed] if keyed else out["results"]).values():
            entry.pop(name, None)
    return out


class Representatives(Mapping):
    """digest -> the report (JSON builtins) of one member of that group: the first seen, kept
    compressed (a 63 KB report in about 7 KB) and decoded when the aggregate describes its group, so
    that a fleet of many distinct reports costs memory by the compressed size of each."""

    def __init__(self):
        self._blobs: dict[str, bytes] = {}

    def keep(self, digest: str, raw: bytes, compressed: Optional[bytes] = None) -> None:
        """Keep `raw` (a report read_report took) for `digest` unless one is kept for it already;
        `compressed`: raw as zlib compressed it already (a rank's upload)."""
        if digest not in self._blobs:
            self._blobs[digest] = compressed if compressed is not None else zlib.compress(raw, 1)

    def __getitem__(self, digest: str) -> dict:
        return msgspec.to_builtins(REPORT_DECODER.decode(zlib.decompress(self._blobs[digest])))

    def __contains__(self, digest: object) -> bool:
        return digest in self._blobs

    def __iter__(self):
        return iter(self._blobs)

    def __len__(self) -> int:
        return len(self._blobs)
