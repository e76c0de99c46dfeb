"""Messages whose cause is in their structure, not in one line: named analyzers a signature can
call (`analyzer = "..."` in a recipe) with the block of lines that follows its match.

xformers' `No operator found for memory_efficient_attention_forward` lists, under every operator,
why it refused the inputs. Most of those reasons are normal (the small-head-dim operator refuses a
head dim of 128 in every report); the cause is the reason shared by the operators that could
have run: the general cutlass operator when it is built, else what every operator says.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Optional


@dataclass
class Finding:
    rule: str  # the rule the structure points to
    line: int  # offset of the deciding line in the block
    text: str  # the deciding line
    captures: dict


_OP_HEADER = re.compile(r"^`(?P<op>[^`]+)` is not supported because:?\s*$")
_INPUT = re.compile(r"^(?P<name>query|key|value)\s*:\s*shape=\((?P<shape>[\d, ]+)\)\s*\((?P<dtype>torch\.\w+)\)")

# (reason pattern, rule, rank): a lower rank is a more telling cause when several apply.
_REASONS: list[tuple[re.Pattern, str, int]] = [
    (re.compile(r"xFormers wasn't build with CUDA support|xFormers can't load"), "AD312", 0),
    (re.compile(r"device=cpu\b|device=cpu \(supported"), "AD256", 1),
    (re.compile(r"attn_bias\.stride\(|aligned by slicing|is not correctly aligned|not a multiple of 8"), "AD254", 2),
    (re.compile(r"dtype=torch\.bfloat16 \(supported: \{torch\.float(?:32|16), torch\.float(?:32|16)\}\)|bf16 is only supported on A100\+? GPUs"), "AD102", 3),
    (re.compile(r"max\(query\.shape\[-1\]|embed per head|only head-dim|head[_ -]?dim|query\.shape\[-1\] % \d+|shape\[-1\] [<>]|K > \d+|does not have enough shared-memory"), "AD603", 4),
    (re.compile(r"dtype=torch\.float32 \(supported"), "AD604", 5),
    (re.compile(r"requires (?:a GPU|device) with (?:compute )?capability|compute capability [<>=]"), "AD103", 6),
]
_NOT_BUILT = re.compile(r"operator wasn't built")
_END = re.compile(r"^(?:Traceback|File \"|During handling|The above exception|\[|[A-Za-z_][\w.]*(?:Error|Exception|Warning)\b:?)")


def xformers_no_operator(lines: list[str]) -> list[Finding]:
    """The root cause of an xformers "No operator found" / "does not support inputs" report."""
    ops: dict[str, list[tuple[int, str]]] = {}
    current: Optional[str] = None
    inputs: dict[str, str] = {}
    for i, raw in enumerate(lines[1:], start=1):
        line = raw.strip()
        m = _OP_HEADER.match(line)
        if m:
            current = m.group("op")
            ops[current] = []
            continue
        m = _INPUT.match(line)
        if m and current is None:
            inputs[m.group("name")] = m.group("dtype").replace("torch.", "")
            inputs.setdefault("head_dim", m.group("shape").split(",")[-1].strip())
            continue
        if current is not None:
            if not line or _END.match(line):
                current = None  # the report ended
                continue
            ops[current].append((i, line))
    if not ops:
        return []
    captures = {k: v for k, v in inputs.items() if k in ("query", "head_dim")}
    every = [reason for reasons in ops.values() for reason in reasons]
    for i, text in every:
        if _REASONS[0][0].search(text):
            return [Finding("AD312", i, text, captures)]
    built = {op: reasons for op, reasons in ops.items() if not any(_NOT_BUILT.search(t) for _, t in reasons)}
    if not built:
        i, text = next((r for r in every if _NOT_BUILT.search(r[1])), every[0])
        return [Finding("AD312", i, text, captures)]
    general = {op: reasons for op, reasons in built.items() if op.lower().startswith("cutlass")}
    chosen = general or built
    best: Optional[tuple[int, Finding]] = None
    for reasons in chosen.values():
        for i, text in reasons:
            for pattern, rule, rank in _REASONS[1:]:
                if pattern.search(text):
                    if best is None or rank < best[0]:
                        best = (rank, Finding(rule, i, text, captures))
                    break
    return [best[1]] if best else []


ANALYZERS: dict[str, Callable[[list[str]], list[Finding]]] = {
    "xformers_no_operator": xformers_no_operator,
}
BLOCK_LINES = 80  # lines after the match an analyzer sees
