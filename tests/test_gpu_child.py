"""The GPU child's streaming protocol, on any machine: what a crashed or hung GPU probe leaves is
kept, and the smoke results become findings. (On a GPU, tests/gpu runs the real thing.)"""

from __future__ import annotations

import json
import sys
import textwrap

from attn_doctor.facts import Facts
from attn_doctor.probes import _apply_gpu_records
from attn_doctor.probes.runner import GPU_CHILD_SCRIPT, start_child
from attn_doctor.rules.engine import evaluate_rule
from attn_doctor.rules.loader import load_recipes


def _script(tmp_path, body):
    path = tmp_path / "fake_gpu_child.py"
    path.write_text(textwrap.dedent(body))
    return path


CUDA = {"status": "ok", "cuda_available": True, "devices": [{"index": 0, "name": "GPU", "capability": "9.0", "bf16_native": True}]}


def test_lines_kept_when_the_child_segfaults(tmp_path):
    script = _script(
        tmp_path,
        f"""
        import json, os, signal, sys
        out = os.fdopen(1, "w")
        out.write(json.dumps({{"cuda": {CUDA!r}}}) + "\\n")
        out.write(json.dumps({{"smoke": {{"backend": "sdpa-math", "dtype": "float16", "status": "ok"}}}}) + "\\n")
        out.write('{{"smoke": {{"backend": "flash_at')  # cut short by the crash
        out.flush()
        os.kill(os.getpid(), signal.SIGSEGV)
        """,
    )
    records, failure = start_child(sys.executable, [], script).lines(30)
    assert [list(r) for r in records] == [["cuda"], ["smoke"]]
    assert failure is not None and "SIGSEGV" in str(failure)
    facts = Facts()
    _apply_gpu_records(facts, records, failure, smoke=True)
    assert facts.torch.cuda_available is True and facts.torch.devices[0].name == "GPU"
    assert facts.smoke.status == "failed" and "after 1 smoke test(s)" in facts.smoke.error
    rule = load_recipes().get("AD701")
    result = evaluate_rule(rule, facts)
    assert result.status == "error" and "SIGSEGV" in result.message


def test_lines_timeout_keeps_what_was_written(tmp_path):
    script = _script(
        tmp_path,
        f"""
        import json, os, time
        os.write(1, (json.dumps({{"cuda": {CUDA!r}}}) + "\\n").encode())
        time.sleep(60)
        """,
    )
    records, failure = start_child(sys.executable, [], script).lines(2)
    assert failure.status == "timeout" and "2 s" in str(failure)
    assert records and records[0]["cuda"]["cuda_available"] is True


def test_real_gpu_child_without_a_gpu():
    # The real script on this machine: torch without CUDA answers, then says it is done.
    records, failure = start_child(sys.executable, [json.dumps({"smoke": True})], GPU_CHILD_SCRIPT).lines(120)
    assert failure is None
    assert records[0]["cuda"]["cuda_available"] is False
    assert records[-1] == {"done": True}
    assert not any("smoke" in r for r in records)


def test_smoke_results_become_findings():
    facts = Facts()
    records = [
        {"cuda": CUDA},
        {"choice": {"dtype": "bfloat16", "head_dim": 128, "backend": "flash_attention"}},
        {"smoke": {"backend": "sdpa-flash", "dtype": "bfloat16", "status": "ok", "rel_err": 0.004, "rel_err_grad": 0.006, "tolerance": 0.04}},
        {"smoke": {"backend": "xformers", "dtype": "bfloat16", "status": "wrong", "rel_err": 0.5, "rel_err_grad": 0.7, "tolerance": 0.04}},
        {"done": True},
    ]
    _apply_gpu_records(facts, records, None, smoke=True)
    assert facts.smoke.status == "ok" and facts.smoke.choices[0].backend == "flash_attention"
    result = evaluate_rule(load_recipes().get("AD701"), facts)
    assert result.status == "error" and result.message.startswith("xformers in bfloat16 relative error 0.5")
