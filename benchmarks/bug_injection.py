"""Bug classes injected into the real source of healthy architectures, each required to be found at
the line that was changed. For every architecture transformers ships as a causal LM whose modeling
file has the shape the class needs (an attention module that calls ``attention_interface(...)``,
an eager ``attention_forward``, a rotary class), a copy of that modeling file with one line added or
changed is loaded in place of the original, the model is built from a scaled-down config
(benchmarks/hf_architectures.py) and traced (`trace FACTORY`, as a user would, in bf16 and fp16);
the class counts as found when a finding names the changed line (the finding's call, the chain, an
operand's origin, a mask's maker: every place a finding points at).

Classes (one line each, inserted before the attention call unless said):
  promote_k       k multiplied by a float32 tensor (an fp32 parameter or table promoting k)
  fp32_mask       a float32 additive mask reaches half scores (SDPA's attn_mask, eager's scores)
  cache_dtype     the keys written into a float32 cache with scatter (a cache made in another dtype)
  rotary_half     the rotary angles computed in the model's half dtype (the rotary class's product line)
  fill_overflow   a mask filled with torch.finfo(torch.float32).min in the half dtype
  bool_added      a boolean mask added to the scores (the eager attention function)
  noncontiguous   q with a non-contiguous last dimension
  all_true_mask   a dense all-True boolean mask passed where none is needed
  wrong_shape     a mask one query row too long
  gqa_headdim     (a config, not a line) grouped-query heads at head dim 512, where the fused kernels refuse

    python benchmarks/bug_injection.py --out inj.jsonl                 # every applicable architecture
    python benchmarks/bug_injection.py --sample 30 --seed 1            # a stratified sample
    python benchmarks/bug_injection.py --table inj.jsonl               # the table of a finished run
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import inspect
import json
import os
import re
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
TIMEOUT = int(os.environ.get("BUG_INJECTION_TIMEOUT", "300"))
DTYPES = ("bf16", "fp16")

ANCHOR = re.compile(r"^([ \t]*)attn_output, attn_weights = attention_interface\($", re.M)
EAGER_SCORES = re.compile(r"^([ \t]*)attn_weights = torch\.matmul\(query, key_states\.transpose\(2, 3\)\) \* scaling$", re.M)
# (transformers 5.17 and older: the product as a matmul of the expanded tables)
ROTARY_MATMUL = re.compile(r"^([ \t]*)freqs = \(inv_freq_expanded\.float\(\) @ position_ids_expanded\.float\(\)\)"
                           r"\.transpose\(1, 2\)$", re.M)
ROTARY = re.compile(r"^([ \t]*)freqs = position_ids\[\.\.\., None\]\.float\(\) \* (self\.)?inv_freq\.to\(device=x\.device, "
                    r"dtype=torch\.float\)$", re.M)

_Q, _K = "query_states", "key_states"
_MASK_SHAPE = "%s.shape[0], 1, %s.shape[2], %s.shape[2]" % (_Q, _Q, _K)
INSERTS = {
    "promote_k": "%s = %s * torch.ones(%s.shape[-1], dtype=torch.float32, device=%s.device)" % (_K, _K, _K, _K),
    "fp32_mask": "attention_mask = torch.zeros(%s, device=%s.device)" % (_MASK_SHAPE, _Q),
    "cache_dtype": ("%s = torch.zeros(*%s.shape, device=%s.device).scatter(2, torch.arange(%s.shape[2], "
                    "device=%s.device).view(1, 1, -1, 1).expand_as(%s), %s)" % (_K, _K, _K, _K, _K, _K, _K)),
    "fill_overflow": ("attention_mask = torch.zeros(%s, dtype=%s.dtype, device=%s.device).masked_fill(torch.ones("
                      "%s.shape[2], %s.shape[2], dtype=torch.bool, device=%s.device).triu(1), "
                      "torch.finfo(torch.float32).min)" % (_MASK_SHAPE, _Q, _Q, _Q, _K, _Q)),
    "noncontiguous": "%s = %s.transpose(-1, -2).contiguous().transpose(-1, -2)" % (_Q, _Q),
    "all_true_mask": "attention_mask = torch.ones(%s, dtype=torch.bool, device=%s.device)" % (_MASK_SHAPE, _Q),
    "wrong_shape": ("attention_mask = torch.zeros(%s.shape[2] + 1, %s.shape[2], dtype=%s.dtype, device=%s.device)"
                    % (_Q, _K, _Q, _Q)),
}
CLASSES = tuple(INSERTS) + ("bool_added", "rotary_half", "gqa_headdim")
# what the attention implementation must be for the class to reach its code
IMPLEMENTATION = {"bool_added": "eager", "fp32_mask": "eager"}


MASK_CLASSES = ("fp32_mask", "fill_overflow", "all_true_mask", "wrong_shape")


def _passes_the_mask(source, anchor):
    """True where the attention call passes the variable attention_mask as its mask."""
    block = source[anchor.end():source.find("\n" + anchor.group(1) + ")", anchor.end())]
    return bool(re.search(r"^\s*attention_mask,\s*$|attention_mask=attention_mask\b", block, re.M))


def _anchors(source, built_classes):
    """The attention calls of the file, those in a class the model builds first (the language
    model's attention before a vision tower's the model never runs on token ids)."""
    import ast

    found = list(ANCHOR.finditer(source))
    if not built_classes or len(found) < 2:
        return found
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return found
    spans = [(n.lineno, n.end_lineno, n.name) for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]

    def owner(m):
        line = source.count("\n", 0, m.start()) + 1
        inside = [c for c in spans if c[0] <= line <= c[1]]
        return min(inside, key=lambda c: c[1] - c[0])[2] if inside else None

    tower = ("Vision", "Audio", "Encoder", "Projector", "Image", "Video", "Speech")

    def rank(m):
        name = owner(m) or ""
        return (name not in built_classes, any(t in name for t in tower) and "Text" not in name)

    return sorted(found, key=rank)


def inject(source, bug, built_classes=()):
    """(new source, the changed line's number, what changed), or None where the file has no place
    for this class."""
    if bug in INSERTS:
        anchors = _anchors(source, built_classes)
        m = anchors[0] if anchors else None
        if m is None or _Q not in source or _K not in source:
            return None
        if bug in MASK_CLASSES and not _passes_the_mask(source, m):
            return None  # the call takes a mask of another name (Doge's dynamic mask): nothing to replace
        indent = m.group(1)
        line_no = source.count("\n", 0, m.start()) + 1
        new = source[:m.start()] + indent + INSERTS[bug] + "  # INJECTED\n" + source[m.start():]
        return new, line_no, INSERTS[bug]
    if bug == "bool_added":
        m = EAGER_SCORES.search(source)
        if m is None:
            return None
        line_no = source.count("\n", 0, m.end()) + 2
        text = ("attn_weights = attn_weights + torch.ones(attn_weights.shape[-2:], dtype=torch.bool, "
                "device=attn_weights.device).tril()")
        new = source[:m.end()] + "\n" + m.group(1) + text + "  # INJECTED" + source[m.end():]
        return new, line_no, text
    if bug == "rotary_half" and ROTARY.search(source) is None:
        m = ROTARY_MATMUL.search(source)
        if m is None:
            return None
        line_no = source.count("\n", 0, m.start()) + 1
        text = "freqs = (inv_freq_expanded.to(x.dtype) @ position_ids_expanded.to(x.dtype)).transpose(1, 2)"
        return source[:m.start()] + m.group(1) + text + "  # INJECTED" + source[m.end():], line_no, text
    if bug == "rotary_half":
        m = ROTARY.search(source)
        if m is None:
            return None
        line_no = source.count("\n", 0, m.start()) + 1
        text = "freqs = position_ids[..., None].to(x.dtype) * %sinv_freq.to(device=x.device, dtype=x.dtype)" % (
            m.group(2) or "")
        new = source[:m.start()] + m.group(1) + text + "  # INJECTED" + source[m.end():]
        return new, line_no, text
    return None


FACTORY = '''import importlib.util, sys
import torch
import transformers


def expose(mod, name):
    # transformers' lazy modules keep the classes they resolved once (AutoModel builds the text
    # model through them): point them at this module's classes, so the copy is what runs
    package = sys.modules[name.rsplit(".", 1)[0]]
    for attr, obj in vars(mod).items():
        if isinstance(obj, type) and obj.__module__ == name:
            setattr(package, attr, obj)
            if attr in getattr(transformers, "__dict__", {{}}) or hasattr(transformers, attr):
                setattr(transformers, attr, obj)

def build(dtype="bfloat16", device="meta"):
    spec = importlib.util.spec_from_file_location({module!r}, {file!r})
    mod = importlib.util.module_from_spec(spec)
    sys.modules[{module!r}] = mod
    spec.loader.exec_module(mod)
    expose(mod, {module!r})
    config = transformers.AutoConfig.from_pretrained({config!r})
    {config_edit}
    cls = getattr(mod, {cls!r})
    with torch.device(device):
        try:
            model = cls._from_config(config, attn_implementation={impl!r}, dtype=getattr(torch, dtype))
        except ValueError:  # an architecture that refuses it (Gemma2 and sdpa): what transformers picks
            config = transformers.AutoConfig.from_pretrained({config!r})
            {config_edit}
            model = cls._from_config(config, dtype=getattr(torch, dtype))
    tc = getattr(config, "text_config", None) or config
    seq = {seq}
    return model.eval(), {{"input_ids": torch.full((1, seq), 5, dtype=torch.long, device=device)}}
'''

# A table in half is within a few roundings at 16 positions and wrong at hundreds: the rotary class
# runs at the positions where it matters (the model's own maximum, up to 512), the others at 16.
SEQ = {"rotary_half": "min(512, getattr(tc, 'max_position_embeddings', None) or 512)"}


def places(finding):
    """Every (file, line) a finding names (tests/realenv/real_bugs.py's walk, repeated here: the
    benchmark runs where the tests folder is not)."""
    out = set()

    def add(entry):
        if isinstance(entry, dict):
            if entry.get("file") and entry.get("line"):
                out.add((os.path.realpath(entry["file"]), entry["line"]))
            for step in list(entry.get("called_by") or ()) + list(entry.get("path") or ()):
                add(step)
            add(entry.get("via"))
            add(entry.get("decided"))
            add(entry.get("operand_origin"))
            add(entry.get("made_at"))
            add(entry.get("mask_made"))

    for e in finding.get("chain") or ():
        add(e)
    for o in finding.get("origins") or ():
        add(o)
    sink = finding.get("sink") or {}
    add(sink)
    add(sink.get("called_from"))
    for info in (sink.get("other_inputs") or {}).values():
        add(info.get("made_at"))
    return out


def run_one(model_type, workdir, classes, dtypes):
    import warnings

    warnings.filterwarnings("ignore")
    sys.path.insert(0, HERE)
    import hf_architectures as arch
    import transformers

    transformers.logging.set_verbosity_error()
    from attn_doctor.tracing.runs.api import trace

    rows = []
    folder = os.path.join(workdir, model_type)
    try:
        made = arch.write_config(model_type, os.path.join(folder, "config"))
        cls = getattr(transformers, made["class"])
        module_name = cls.__module__
        source_file = inspect.getsourcefile(cls)
        with open(source_file, encoding="utf-8") as fh:
            source = fh.read()
    except BaseException as exc:  # noqa: BLE001
        return [{"model_type": model_type, "outcome": "no_config", "reason": "%s: %s" % (type(exc).__name__, exc)}]
    original = sys.modules.get(module_name)
    try:
        return _inject_all(rows, model_type, folder, made, source, source_file, module_name, classes, dtypes, trace)
    finally:
        if original is not None:  # the next architecture this process runs sees transformers' own module
            sys.modules[module_name] = original
            package = sys.modules[module_name.rsplit(".", 1)[0]]
            for attr, obj in vars(original).items():
                if isinstance(obj, type) and obj.__module__ == module_name:
                    setattr(package, attr, obj)
                    if attr in vars(transformers):
                        setattr(transformers, attr, obj)


def _built(made, folder):
    """(the classes the model builds, its text config): where the injected line must be to run."""
    import torch
    import transformers

    config = transformers.AutoConfig.from_pretrained(os.path.join(folder, "config"))
    with torch.device("meta"):
        model = getattr(transformers, made["class"])._from_config(config)
    return {type(m).__name__ for m in model.modules()}, getattr(config, "text_config", None) or config


def _baseline(model_type, folder, made, source_file, module_name, dtypes, trace):
    """{dtype: None where the uninjected model traces clean, else why not}: an injected bug counts
    only on a build that is healthy without it."""
    base_dir = os.path.join(folder, "baseline")
    os.makedirs(base_dir, exist_ok=True)
    target = os.path.join(base_dir, os.path.basename(source_file))
    with open(source_file, encoding="utf-8") as src, open(target, "w", encoding="utf-8") as dst:
        dst.write(src.read())
    factory = os.path.join(base_dir, "factory_%s_baseline.py" % model_type.replace("-", "_"))
    with open(factory, "w", encoding="utf-8") as fh:
        fh.write(FACTORY.format(module=module_name, file=target, config=os.path.join(folder, "config"),
                                cls=made["class"], impl="sdpa", config_edit="pass", seq="16"))
    out = {}
    for dtype in dtypes:
        try:
            report = trace(target=factory + ":build", factory_kwargs={"dtype": {"bf16": "bfloat16", "fp16": "float16"}[dtype]},
                           routes=False, cwd=base_dir)
        except BaseException as exc:  # noqa: BLE001
            out[dtype] = "%s: %s" % (type(exc).__name__, exc)
            continue
        bad = [f["id"] for f in report.get("findings") or () if f["severity"] in ("error", "warning")]
        if report["status"] != "ok" or bad:
            out[dtype] = (report.get("error") or {}).get("message") or "findings %s" % bad
        else:
            out[dtype] = None
        out.setdefault("families", set()).update(s.get("family") for s in report.get("sinks") or ())
    return out


# Classes about what SDPA's fused kernels refuse: a bug only where the attention runs through SDPA
# (written-out attention takes any layout, mask and head dim at the same cost).
SDPA_ONLY = ("noncontiguous", "all_true_mask", "gqa_headdim")


def _inject_all(rows, model_type, folder, made, source, source_file, module_name, classes, dtypes, trace):
    try:
        built, text_config = _built(made, folder)
    except Exception:  # noqa: BLE001 - the factory will say why
        built, text_config = set(), None
    baseline = _baseline(model_type, folder, made, source_file, module_name, dtypes, trace)
    for bug in classes:
        config_edit = "pass"
        if bug == "gqa_headdim":
            if text_config is None or "head_dim" not in vars(text_config) or "num_key_value_heads" not in vars(text_config):
                injected = None  # a config without an explicit head dim and grouped heads: nothing to set
            else:
                injected = (source, None, "config: head_dim 512, 2 kv heads")
            config_edit = ("tc = getattr(config, 'text_config', config); tc.head_dim = 512; "
                           "tc.num_key_value_heads = 2 if tc.num_attention_heads % 2 == 0 else 1")
        else:
            injected = inject(source, bug, built)
        if bug in SDPA_ONLY and "sdpa" not in baseline.get("families", ()):
            injected = None
        if injected is None:
            rows.append({"model_type": model_type, "bug": bug, "outcome": "not_applicable"})
            continue
        new_source, line_no, what = injected
        bug_dir = os.path.join(folder, bug)
        os.makedirs(bug_dir, exist_ok=True)
        target = os.path.join(bug_dir, os.path.basename(source_file))
        with open(target, "w", encoding="utf-8") as fh:
            fh.write(new_source)
        factory = os.path.join(bug_dir, "factory_%s_%s.py" % (model_type.replace("-", "_"), bug))  # one module name each
        with open(factory, "w", encoding="utf-8") as fh:
            fh.write(FACTORY.format(module=module_name, file=target, config=os.path.join(folder, "config"),
                                    cls=made["class"], impl=IMPLEMENTATION.get(bug, "sdpa"), config_edit=config_edit,
                                    seq=SEQ.get(bug, "16")))
        for dtype in dtypes:
            row = {"model_type": model_type, "bug": bug, "dtype": dtype, "class": made["class"],
                   "changed": "%s:%s" % (os.path.basename(target), line_no) if line_no else None, "what": what}
            if baseline.get(dtype):
                row.update(outcome="baseline_not_clean", reason=str(baseline[dtype])[:300])
                rows.append(row)
                continue
            t0 = time.monotonic()
            try:
                report = trace(target=factory + ":build",
                               factory_kwargs={"dtype": {"bf16": "bfloat16", "fp16": "float16"}[dtype]},
                               routes=False, cwd=bug_dir)
            except BaseException as exc:  # noqa: BLE001
                row.update(outcome="crash", reason="%s: %s" % (type(exc).__name__, str(exc)[:300]))
                rows.append(row)
                continue
            findings = list(report.get("findings") or ())
            named = set()
            for f in findings:
                named |= places(f)
            want = (os.path.realpath(target), line_no)
            at_line = [f["id"] for f in findings if line_no is None or want in places(f)]
            severities = sorted({f["severity"] for f in findings if line_no is None or want in places(f)})
            row.update(status=report["status"], exit=report["exit_code"], trace_s=round(time.monotonic() - t0, 2),
                       findings=[f["id"] for f in findings], at_line=at_line, severity=severities,
                       error=(report.get("error") or {}).get("message"))
            if report["status"] in ("failed", "usage_error"):
                row["outcome"] = "failed"
            elif line_no is None:
                row["outcome"] = "found" if findings else "missed"
            else:
                row["outcome"] = "found" if at_line else ("elsewhere" if findings else "missed")
            rows.append(row)
    return rows


def applicable_architectures():
    """Causal LMs (text in, the class a user trains) whose modeling file holds at least one place."""
    sys.path.insert(0, HERE)
    import hf_architectures as arch
    import transformers

    maps = arch.mappings()
    causal = maps.get("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES") or {}
    out = []
    for model_type in sorted(causal):
        name = causal[model_type]
        name = name[0] if isinstance(name, (list, tuple)) else name
        try:
            cls = getattr(transformers, name)
            with open(inspect.getsourcefile(cls), encoding="utf-8") as fh:
                source = fh.read()
        except BaseException:  # noqa: BLE001
            continue
        if ANCHOR.search(source) or EAGER_SCORES.search(source) or ROTARY.search(source):
            out.append(model_type)
    return out


def table(rows):
    lines = []
    skipped = [r for r in rows if r.get("outcome") == "baseline_not_clean"]
    runs = [r for r in rows if r.get("dtype") and r.get("outcome") != "baseline_not_clean"]
    by = collections.defaultdict(collections.Counter)
    for r in runs:
        by[r["bug"]][r["outcome"]] += 1
    archs = sorted({r["model_type"] for r in rows})
    lines.append("architectures: %d; injected runs (architecture x class x dtype): %d" % (len(archs), len(runs)))
    lines.append("%-15s %6s %6s %9s %6s %6s %6s  %s" % ("class", "runs", "found", "elsewhere", "missed", "failed",
                                                        "crash", "found at the changed line"))
    total = collections.Counter()
    for bug in CLASSES:
        c = by.get(bug, collections.Counter())
        n = sum(c.values())
        total.update(c)
        rate = "%.1f%%" % (100.0 * c["found"] / n) if n else "-"
        lines.append("%-15s %6d %6d %9d %6d %6d %6d  %s" % (bug, n, c["found"], c["elsewhere"], c["missed"],
                                                            c["failed"], c["crash"], rate))
    n = sum(total.values())
    lines.append("%-15s %6d %6d %9d %6d %6d %6d  %s" % ("all", n, total["found"], total["elsewhere"], total["missed"],
                                                        total["failed"], total["crash"],
                                                        "%.1f%%" % (100.0 * total["found"] / n) if n else "-"))
    notes = collections.Counter(r["bug"] for r in runs if r.get("outcome") == "found" and r.get("severity") == ["info"])
    if notes:
        lines.append("found as a note only (the kernel is the same either way on the GPU judged for): " +
                     ", ".join("%s %d" % kv for kv in sorted(notes.items())))
    lines.append("not counted: %d runs on %d architectures whose uninjected build does not trace clean" % (
        len(skipped), len({r["model_type"] for r in skipped})))
    na = collections.Counter(r["bug"] for r in rows if r.get("outcome") == "not_applicable")
    lines.append("not applicable (the file has no place for the class): " + ", ".join("%s %d" % kv for kv in sorted(na.items())))
    misses = [r for r in runs if r["outcome"] != "found"]
    lines.append("")
    lines.append("not found at the changed line (%d):" % len(misses))
    for r in misses[:80]:
        lines.append("  %-24s %-14s %-5s %-9s findings %s; %s" % (r["model_type"], r["bug"], r["dtype"], r["outcome"],
                                                                  r.get("findings"), (r.get("error") or r.get("reason") or "")[:150]))
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="bug_injection.jsonl")
    ap.add_argument("--only")
    ap.add_argument("--sample", type=int)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--classes", default=",".join(CLASSES))
    ap.add_argument("--dtypes", default=",".join(DTYPES))
    ap.add_argument("--table")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--workdir", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    classes, dtypes = args.classes.split(","), args.dtypes.split(",")
    if args.one:
        for row in run_one(args.one, args.workdir, classes, dtypes):
            print(json.dumps(row), flush=True)
        return 0
    if args.serve:
        sys.path.insert(0, HERE)
        from worker_pool import serve

        serve(lambda name: run_one(name, args.workdir, classes, dtypes))
        return 0
    if args.table:
        with open(args.table, encoding="utf-8") as fh:
            print(table([json.loads(line) for line in fh if line.strip()]))
        return 0
    types = args.only.split(",") if args.only else applicable_architectures()
    if args.sample and not args.only:
        import random

        rng = random.Random(args.seed)
        types = sorted(rng.sample(types, min(args.sample, len(types))))
    workdir = tempfile.mkdtemp(prefix="bug-injection-")
    t0 = time.monotonic()
    sys.path.insert(0, HERE)
    from worker_pool import run_jobs

    cmd = [sys.executable, os.path.abspath(__file__), "--serve", "--workdir", workdir, "--classes", ",".join(classes),
           "--dtypes", ",".join(dtypes)]
    done = [0]
    with open(args.out, "w", encoding="utf-8") as out:
        def on_done(name, got):
            done[0] += 1
            for row in got:
                out.write(json.dumps(row) + "\n")
            out.flush()
            print("[%d/%d] %s" % (done[0], len(types), name), file=sys.stderr, flush=True)

        rows = run_jobs(cmd, types, args.workers, TIMEOUT, on_done=on_done, cwd=REPO)
    print(table(rows))
    print("wall time: %.0f s for %d architectures with %d workers" % (time.monotonic() - t0, len(types), args.workers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
