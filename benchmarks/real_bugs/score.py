"""Score `attn-doctor trace` on the real-bug pairs in this folder.

For every folder with a meta.json, trace buggy.py:build and fixed.py:build with the CLI
(`attn-doctor trace FILE:build --json`), on the meta device and on cpu, with the autocast the
pair's meta.json names under "trace" (the bugs that only exist inside an autocast region). Then:

- buggy found: a finding of severity error or warning names a `# BUG` line of buggy.py, by its
  own line (the sink), a chain entry, an operand's origin, the line it says to change, the mask's
  maker, the callers, or a patch whose removed lines are `# BUG` lines. "note" in the column means
  only an info-level finding named it.
- fixed clean: the trace ran (judged at least one attention call, or raised nothing) and no
  finding of severity error or warning, in any traced route.

    python benchmarks/real_bugs/score.py [--only NAME ...] [--devices meta cpu] [--json OUT]
    python benchmarks/real_bugs/score.py --rejudge OUT     # score saved reports again, no tracing

The doctor is the one installed beside this interpreter (.venv-dev/bin/attn-doctor), run in a
subprocess per trace, in-process there (VIRTUAL_ENV and CONDA_PREFIX are cleared so it traces with
its own torch).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
BAD = ("error", "warning")


def doctor_cmd():
    exe = Path(sys.executable).with_name("attn-doctor")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "attn_doctor"]


def bug_lines(path):
    lines = path.read_text().splitlines()
    return {i + 1 for i, line in enumerate(lines) if line.rstrip().endswith("# BUG")}, lines


def trace(target, device, autocast, timeout):
    cmd = doctor_cmd() + ["trace", target, "--json", "--device", device]
    if autocast:
        cmd += ["--autocast", autocast]
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env.setdefault("NO_COLOR", "1")
    t0 = time.time()
    try:
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "exit_code": None, "findings": [], "routes": [],
                "error": {"message": f"timed out after {timeout} s"}}, time.time() - t0
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        report = {"status": "no-json", "exit_code": proc.returncode, "findings": [], "routes": [],
                  "error": {"message": (proc.stderr or proc.stdout)[-500:]}}
    return report, time.time() - t0


def all_findings(report):
    seen = []
    for f in report.get("findings") or []:
        seen.append(f)
    for route in report.get("routes") or []:
        for f in route.get("findings") or []:
            if f not in seen:
                seen.append(f)
    return seen


def _walk(obj, file_name, out, parent_file=None):
    """Collect the lines of `file_name` that a finding points at, wherever it says so."""
    if isinstance(obj, dict):
        own_file = obj.get("file") if isinstance(obj.get("file"), str) else None
        here_file = own_file or parent_file
        for key, value in obj.items():
            if isinstance(value, bool):
                continue
            if isinstance(value, int) and "line" in key.lower():
                if here_file is None or Path(here_file).name == file_name:
                    out.add(value)
            elif isinstance(value, str):
                for m in re.finditer(r"([\w./\\-]*?)%s:(\d+)" % re.escape(file_name), value):
                    out.add(int(m.group(2)))
            else:
                _walk(value, file_name, out, here_file)
    elif isinstance(obj, list):
        for item in obj:
            _walk(item, file_name, out, parent_file)
    elif isinstance(obj, str):
        for m in re.finditer(r"%s:(\d+)" % re.escape(file_name), obj):
            out.add(int(m.group(1)))


def patch_removes_bug_line(finding, src_lines):
    """A unified diff in the finding (patch text, anywhere) whose '-' lines are `# BUG` lines."""
    texts = []

    def grab(obj):
        if isinstance(obj, dict):
            for v in obj.values():
                grab(v)
        elif isinstance(obj, list):
            for v in obj:
                grab(v)
        elif isinstance(obj, str) and "\n-" in obj and "@@" in obj:
            texts.append(obj)

    grab(finding.get("patch"))
    for text in texts:
        for line in text.splitlines():
            if line.startswith("-") and not line.startswith("---") and line.rstrip().endswith("# BUG"):
                return True
    return False


def judge_buggy(report, path):
    bugs, src = bug_lines(path)
    best = None
    for f in all_findings(report):
        lines = set()
        _walk(f, path.name, lines, f.get("sink", {}).get("file") if isinstance(f.get("sink"), dict) else None)
        hit = bool(lines & bugs) or patch_removes_bug_line(f, src)
        if hit:
            sev = f.get("severity")
            if sev in BAD:
                return "yes", f.get("id")
            best = best or ("note", f.get("id"))
    return best or ("no", None)


def judge_fixed(report):
    status = report.get("status")
    bad = [f for f in all_findings(report) if f.get("severity") in BAD]
    if bad:
        return "no", sorted({f.get("id") for f in bad})
    if status in ("timeout", "no-json") or report.get("exit_code") == 3:
        return "not run", [status]
    return "yes", []


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--devices", nargs="*", default=["meta", "cpu"])
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--json", help="write every report and verdict here")
    ap.add_argument("--rejudge", help="score the reports of an earlier --json run again (no tracing)")
    args = ap.parse_args()
    earlier = json.loads(Path(args.rejudge).read_text())["reports"] if args.rejudge else None

    rows, dump = [], {}
    for folder in sorted(p for p in HERE.iterdir() if (p / "meta.json").exists()):
        if args.only and folder.name not in args.only:
            continue
        meta = json.loads((folder / "meta.json").read_text())
        autocast = (meta.get("trace") or {}).get("autocast")
        row = {"name": folder.name, "kind": meta.get("kind_tag") or meta.get("kind", "")[:40],
               "observable": "no" if meta.get("observable") is False else "yes"}
        for device in args.devices:
            rel = folder.relative_to(REPO)
            if earlier is not None:
                rep_b, rep_f = earlier[f"{folder.name}/{device}"]["buggy"], earlier[f"{folder.name}/{device}"]["fixed"]
                tb = tf = 0.0
            else:
                rep_b, tb = trace(f"{rel}/buggy.py:build", device, autocast, args.timeout)
                rep_f, tf = trace(f"{rel}/fixed.py:build", device, autocast, args.timeout)
            found, rule = judge_buggy(rep_b, folder / "buggy.py")
            clean, rules = judge_fixed(rep_f)
            row[device] = {"found": found, "rule": rule, "clean": clean, "fixed_rules": rules,
                           "buggy_status": rep_b.get("status"), "fixed_status": rep_f.get("status"),
                           "seconds": round(tb + tf, 1)}
            dump[f"{folder.name}/{device}"] = {"buggy": rep_b, "fixed": rep_f, "verdict": row[device]}
        rows.append(row)
        print(f"  traced {folder.name}", file=sys.stderr, flush=True)

    head = f"{'name':36} {'kind':34} {'obs':4}"
    for d in args.devices:
        head += f" | {d + ' buggy found':24} {d + ' fixed clean':18}"
    print(head)
    print("-" * len(head))
    for r in rows:
        line = f"{r['name']:36} {r['kind'][:34]:34} {r['observable']:4}"
        for d in args.devices:
            v = r[d]
            found = v["found"] + (f" ({v['rule']})" if v["rule"] else "")
            clean = v["clean"] + (f" ({','.join(str(x) for x in v['fixed_rules'])})" if v["fixed_rules"] else "")
            line += f" | {found:24} {clean:18}"
        print(line)
    print("-" * len(head))
    n = len(rows)
    for d in args.devices:
        found = sum(r[d]["found"] == "yes" for r in rows)
        clean = sum(r[d]["clean"] == "yes" for r in rows)
        both = sum(r[d]["found"] == "yes" and r[d]["clean"] == "yes" for r in rows)
        print(f"{d}: buggy found at its line {found}/{n}, fixed clean {clean}/{n}, both {both}/{n}")
    obs = [r for r in rows if r["observable"] == "yes"]
    for d in args.devices:
        found = sum(r[d]["found"] == "yes" for r in obs)
        clean = sum(r[d]["clean"] == "yes" for r in obs)
        print(f"{d} (observable pairs only, {len(obs)}): found {found}/{len(obs)}, fixed clean {clean}/{len(obs)}")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "reports": dump}, indent=1))


if __name__ == "__main__":
    main()
