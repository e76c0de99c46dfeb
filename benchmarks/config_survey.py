"""Every real config file of tests/fixtures/configs/real/ (and the OpenMMLab Python configs of
tests/fixtures/configs/python/, read with their _base_ chains) through `attn-doctor check --gpu GPU`, as a
user runs it (this environment's software, the GPU assumed), for a T4, an A100 and an H100:

    python benchmarks/config_survey.py [--gpu t4 --gpu a100 --gpu h100] [--python PYTHON] [--markdown]

Prints, per framework, the settings its reader took from the files (the keys, and how many files had
each), then per file: the framework it was read as, its plan, and the config findings on each GPU
(errors and warnings, `-` for none). One check per GPU with every file given (-c ... -c ...); a
finding is put on the files its evidence names. Exit 1 if a file was not read as the framework of
its folder (an unknown or unreadable file included).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT / "tests" / "fixtures" / "configs" / "real"
# A file's folder names its framework; these files are another framework's, shipped beside a recipe.
SHIPPED_BESIDE = {"llamafactory/ds_z3_config.json": "deepspeed", "ms-swift/zero3.json": "deepspeed",
                  "ms-swift/fsdp2.json": "unknown",
                  # nothing only TRL writes (model_name_or_path, dataset_name): read as no framework, issue 53
                  "trl/example_config.yaml": "unknown"}


PYTHON = ROOT / "tests" / "fixtures" / "configs" / "python"


def _python_leaves() -> list[Path]:
    """The real OpenMMLab Python configs a user trains with (python/EXPECTED.toml's leaves; their _base_
    files are read through them)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    rows = tomllib.loads((PYTHON / "EXPECTED.toml").read_text())["leaf"]
    return sorted(PYTHON / row["name"] for row in rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpu", action="append", help="GPUs to judge for (default: t4, a100, h100)")
    parser.add_argument("--python", default=sys.executable, help="the interpreter that runs attn-doctor")
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    parser.add_argument("--harvest", action="store_true",
                        help="the label-free figures over tests/fixtures/configs/harvest/ (real files of projects no reader was "
                             "written from, each with its source): claims, defaults assumed, unreadable, plan-vs-file consistency")
    parser.add_argument("--longtail", action="store_true",
                        help="survey tests/fixtures/configs/longtail/ instead: real files of frameworks without a reader, "
                             "and what the doctor read of each (the generic reader, or the reader that claimed it)")
    args = parser.parse_args()
    if args.harvest:
        return harvest(args)
    if args.longtail:
        return longtail(args)
    gpus = args.gpu or ["t4", "a100", "h100"]
    files = sorted(p for p in REAL.rglob("*") if p.is_file() and p.name != "SOURCES.toml") + _python_leaves()
    argv = [a for f in files for a in ("-c", str(f))]
    found: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    configs = None
    for gpu in gpus:
        started = time.monotonic()
        proc = subprocess.run([args.python, "-m", "attn_doctor", "check", "--gpu", gpu, "--no-sample", *argv, "--json"],
                              capture_output=True, text=True, cwd=ROOT, timeout=600)
        seconds = time.monotonic() - started
        report = json.loads(proc.stdout)
        configs = configs or report["facts"]["configs"]
        print(f"check --gpu {gpu} -c ({len(files)} files): exit {proc.returncode}, {seconds:.1f} s "
              f"({report['facts']['assumed_gpu']['name']}, sm{report['facts']['assumed_gpu']['capability'].replace('.', '')})")
        for result in report["results"]:
            if result["area"] == "config" and result["status"] in ("error", "warning"):
                for path in result["evidence"].get("config_files") or []:
                    found[path][gpu].append(f"{result['rule']}{'!' if result['status'] == 'error' else '?'}")
    print()
    by_path = {c["path"]: c for c in configs}
    read = defaultdict(lambda: defaultdict(set))
    wrong = []
    rows = []
    for path in files:
        if path.is_relative_to(PYTHON):
            name, expected = "python/" + str(path.relative_to(PYTHON)), "mmengine"
        else:
            name = str(path.relative_to(REAL))
            expected = SHIPPED_BESIDE.get(name, name.split("/")[0])
        config = by_path[str(path)]
        if config["kind"] != expected:
            wrong.append(f"{name}: read as {config['kind']}, expected {expected}")
        for setting, value in config.get("plan", {}).items():
            if value.get("source") == "file" and value.get("key"):
                read[config["kind"]][f"{setting} <- {value['key']}"].add(name)
            elif value.get("source") == "env":
                read[config["kind"]][f"{setting} <- ${value['key']}"].add(name)
            else:
                read[config["kind"]][f"{setting} <- default"].add(name)
        plan = config.get("plan", {})
        short = ", ".join(f"{k.replace('_dtype', '')}={_short(plan[k]['value'])}" for k in
                          ("compute_dtype", "param_dtype", "tf32", "fp8", "attention") if k in plan)
        cells = [" ".join(found[str(path)][g]) or "-" for g in gpus]
        rows.append((name, config["kind"], short + (f"; not understood: {', '.join(config['unread'])}" if config.get("unread") else ""), cells))
    sep = " | " if args.markdown else "  "
    print("frameworks x settings read (the key each plan value came from, and in how many real files):")
    for kind in sorted(read):
        print(f"  {kind}: " + "; ".join(f"{k} ({len(v)})" for k, v in sorted(read[kind].items())))
    print()
    header = ["file", "read as", "plan"] + [f"on {g}" for g in gpus]
    print(("| " if args.markdown else "") + sep.join(header) + (" |" if args.markdown else ""))
    if args.markdown:
        print("|" + "---|" * len(header))
    for name, kind, short, cells in rows:
        line = sep.join([name, kind, short, *cells])
        print(("| " + line + " |") if args.markdown else line)
    print(f"\n{len(files)} files, {len(files) - len(wrong)} read as their framework; findings: ! error, ? warning")
    for line in wrong:
        print("  NOT AS EXPECTED: " + line)
    return 1 if wrong else 0


def longtail(args) -> int:
    """Each long-tail file as `check` reads it, and the tally by reader."""
    sys.path.insert(0, str(ROOT))
    from attn_doctor.probes.configs import probe_config

    folder = ROOT / "tests" / "fixtures" / "configs" / "longtail"
    files = sorted(p for p in folder.iterdir() if p.name != "SOURCES.toml")
    tally: dict[str, int] = defaultdict(int)
    sep = " | " if args.markdown else "  "
    print(("| " if args.markdown else "") + sep.join(["file", "read as", "plan (key)"]) + (" |" if args.markdown else ""))
    if args.markdown:
        print("|---|---|---|")
    for path in files:
        config = probe_config(str(path), {})
        kind = config.kind if config.status == "ok" else "unreadable"
        tally[kind] += 1
        plan = ", ".join(f"{k.replace('_dtype', '')}={_short(v.value)} ({v.key})" for k, v in config.plan.items()
                         if k in ("compute_dtype", "param_dtype", "fp8", "attention", "quantization"))
        line = sep.join([path.name, kind, plan or "-"])
        print(("| " + line + " |") if args.markdown else line)
    print(f"\n{len(files)} files: " + ", ".join(f"{k} {v}" for k, v in sorted(tally.items(), key=lambda kv: -kv[1])))
    return 1 if tally.get("unreadable") else 0


def harvest(args) -> int:
    """Each harvested file read as check reads it (its Python _base_ files through the leaves that name
    them, and alone), and the figures that need no label:
    - claimed: readers with evidence only their framework writes (after a reader gives way to the one
      it builds on, as recognise does): more than one is an ambiguity;
    - defaults assumed: plan values taken from a framework's defaults (source "default"), and among
      them those of a file no reader claimed (never allowed: the generic reader assumes none);
    - unreadable: what the reader said;
    - consistency: every key that looks like a precision or attention setting is in the plan, in
      the settings the reader took, or in "not understood"."""
    sys.path.insert(0, str(ROOT))
    from attn_doctor.probes.configs import claimants, load_with_format, probe_config
    from attn_doctor.probes.configs.plan import _walk, looks_like_setting

    folder = ROOT / "tests" / "fixtures" / "configs" / "harvest"
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != "SOURCES.toml")
    kinds: dict[str, int] = defaultdict(int)
    multi, unclaimed_defaults, defaults, unreadable, inconsistent = [], [], [], [], []
    for path in files:
        config = probe_config(str(path), {})
        kind = config.kind if config.status == "ok" else "unreadable"
        kinds[kind] += 1
        if config.status != "ok":
            unreadable.append((path, config.error))
            continue
        try:
            doc, fmt = load_with_format(path)
        except Exception:  # noqa: BLE001 - read by probe_config already
            doc, fmt = None, None
        if isinstance(doc, dict):
            names = {reader.NAME for _score, reader, _found in claimants(doc, fmt)[0]}
            if len(names) > 1:
                multi.append((path, sorted(names)))
            # every key at any depth that looks like a precision or attention setting: read by the reader
            # (itself or a parent), or said "not understood"; one neither is a setting the check never saw
            read = _read_keys(doc, fmt, path)
            said = {u.split(" (", 1)[0] for u in config.unread}
            missing = sorted(k for k, v in _walk(doc, "", 16) if not isinstance(v, dict) and looks_like_setting(k)
                             and not (v is None or v is False or v == "" or v == [])  # a setting left off asks for nothing
                             and not any(k == r or k.startswith(r + ".") for r in read) and k not in said)
            if missing:
                inconsistent.append((path, config.kind, missing[:6] + ([f"(+{len(missing) - 6} more)"] if len(missing) > 6 else [])))
        assumed = [k for k, v in config.plan.items() if v.source == "default"]
        if assumed:
            defaults.append(path)
            if config.kind in ("unknown", "generic"):
                unclaimed_defaults.append((path, assumed))
    repos = {p.relative_to(folder).parts[0] for p in files}
    rel = lambda p: str(p.relative_to(folder))  # noqa: E731
    print(f"{len(files)} files of {len(repos)} repositories (tests/fixtures/configs/harvest)")
    print("read as: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])))
    print(f"claimed by more than one reader: {len(multi)}")
    for path, names in multi:
        print(f"  {rel(path)}: {', '.join(names)}")
    print(f"framework defaults assumed: {len(defaults)} files, of them without a reader's claim: {len(unclaimed_defaults)}")
    for path, assumed in unclaimed_defaults:
        print(f"  {rel(path)}: {', '.join(assumed)}")
    print(f"unreadable: {len(unreadable)}")
    for path, error in unreadable:
        print(f"  {rel(path)}: {error}")
    print(f"keys that look like precision or attention settings (any depth) neither read nor said 'not understood': "
          f"{len(inconsistent)} files")
    for path, kind, missing in inconsistent:
        print(f"  {rel(path)} ({kind}): {', '.join(missing)}")
    return 1 if multi or unclaimed_defaults or inconsistent else 0


def _read_keys(doc, fmt, path) -> set:
    """The dotted keys the file's reader read (or the generic reader, where none claims it), as check reads it."""
    from attn_doctor.probes.configs import Context, choose_reader

    reader, _why = choose_reader(doc, fmt)
    return set(reader.read(doc, Context(base=path.parent, env={})).read) if reader is not None else set()


def _short(value) -> str:
    return {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", True: "on", False: "off"}.get(value, str(value)) \
        if isinstance(value, (str, bool)) else str(value)


if __name__ == "__main__":
    sys.exit(main())
