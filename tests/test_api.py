"""The Python API (attn_doctor/api.py): check, explain, trace and preflight, with real torch on CPU
and meta. Every call asserts that nothing was printed (the API never prints)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import msgspec
import pytest

import attn_doctor
from attn_doctor import AttnDoctorError, PreflightError, ProbeError, UsageError

REPO = Path(__file__).resolve().parents[1]

# A transformers config.json asking for flash_attention_2: AD505 (error) wherever flash-attn is not
# installed, which holds in the test environment (the quick check sees it from metadata alone).
FA2_CONFIG = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64,
              "num_attention_heads": 4, "torch_dtype": "bfloat16", "attn_implementation": "flash_attention_2"}

MODEL_SOURCE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    """One attention block; upcast=True casts the query to float32, as a careless rotary does."""

    def __init__(self, dim=32, heads=4, upcast=False, data_dependent=False, broken=False):
        super().__init__()
        self.heads, self.upcast, self.data_dependent, self.broken = heads, upcast, data_dependent, broken
        self.qkv = nn.Linear(dim, 3 * dim)
        self.norm = nn.LayerNorm(dim)
        self.out = nn.Linear(dim, dim)
        self.register_buffer("scale", torch.ones(dim))

    def forward(self, x):
        if self.broken:
            raise ValueError("the user's forward is broken")
        if self.data_dependent and x.abs().sum().item() < 0:  # .item(): meta cannot answer
            x = -x
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm(x) * self.scale).view(b, s, 3, self.heads, d // self.heads).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        if self.upcast:
            q = q.float()
        o = F.scaled_dot_product_attention(q, k, v)
        return self.out(o.transpose(1, 2).reshape(b, s, d).to(x.dtype))
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy model's module, from a real file (the trace points at its lines)."""
    path = tmp_path / "toy_model.py"
    path.write_text(MODEL_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    sys.modules.pop("toy_model", None)
    module = importlib.import_module("toy_model")
    yield module
    sys.modules.pop("toy_model", None)


@pytest.fixture
def fa2_config(tmp_path) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(FA2_CONFIG))
    return path


def snapshot(model):
    """Everything of the user's model the API must leave alone."""
    tensors = {name: (t.data_ptr(), t.dtype, t.device, t.requires_grad, t.detach().clone())
               for name, t in list(model.named_parameters()) + list(model.named_buffers())}
    return tensors, model.training


def assert_untouched(model, before):
    import torch

    tensors, training = before
    now = dict(list(model.named_parameters()) + list(model.named_buffers()))
    assert set(now) == set(tensors)
    for name, (ptr, dtype, device, requires_grad, values) in tensors.items():
        t = now[name]
        assert (t.data_ptr(), t.dtype, t.device, t.requires_grad) == (ptr, dtype, device, requires_grad), name
        assert torch.equal(t.detach(), values), name
    assert model.training == training


# ----------------------------------------------------------------------------------------- import


def test_import_is_cheap_and_quick_check_imports_no_torch():
    code = textwrap.dedent("""
        import json, sys
        import attn_doctor
        cheap = "attn_doctor.api" not in sys.modules and "msgspec" not in sys.modules
        report = attn_doctor.check(quick=True)
        print(json.dumps({"cheap": cheap, "torch": any(m == "torch" or m.startswith("torch.") for m in sys.modules),
                          "type": type(report).__module__ + "." + type(report).__name__,
                          "quick": report.facts.quick, "exit_code": report.exit_code}))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # never prints, not even to stderr
    doc = json.loads(proc.stdout)
    assert doc == {"cheap": True, "torch": False, "type": "attn_doctor.report.Report", "quick": True,
                   "exit_code": doc["exit_code"]}
    assert doc["exit_code"] in (0, 1)


def test_public_names_and_one_usage_error():
    from attn_doctor import options

    assert options.UsageError is UsageError  # the CLI and the API share one class
    for exc in (UsageError, ProbeError, PreflightError):
        assert issubclass(exc, AttnDoctorError)
    assert attn_doctor.PreflightError is PreflightError
    import inspect

    from attn_doctor import api

    assert list(inspect.signature(attn_doctor.trace).parameters)[:2] == ["model", "example_inputs"]
    assert list(inspect.signature(attn_doctor.explain).parameters)[0] == "text"
    # The tracer and the explainer are packages named apart from the API's functions: importing
    # them leaves attn_doctor.trace and attn_doctor.explain the plain functions of the API.
    import importlib

    importlib.import_module("attn_doctor.explaining.core")
    core = importlib.import_module("attn_doctor.tracing.runs.api")
    assert core.__name__ == "attn_doctor.tracing.runs.api"
    assert attn_doctor.trace is api.trace and attn_doctor.explain is api.explain
    assert inspect.isfunction(attn_doctor.trace) and inspect.isfunction(attn_doctor.explain)
    with pytest.raises(AttributeError):
        attn_doctor.no_such_name  # noqa: B018


# ------------------------------------------------------------------------------------------ check


def test_check_returns_the_report_the_cli_serialises(capsys):
    from attn_doctor.report import Report

    report = attn_doctor.check(quick=True)
    assert isinstance(report, Report)
    proc = subprocess.run([sys.executable, "-m", "attn_doctor", "check", "--quick", "--json"], capture_output=True,
                          text=True, timeout=120)
    cli = json.loads(proc.stdout)
    mine = json.loads(msgspec.json.encode(report))
    assert {r["rule"]: r["status"] for r in mine["results"]} == {r["rule"]: r["status"] for r in cli["results"]}
    assert mine["exit_code"] == cli["exit_code"] == proc.returncode
    assert mine["schema"] == cli["schema"] == "attn-doctor/report"
    assert capsys.readouterr() == ("", "")


def test_check_judges_a_config(fa2_config, capsys):
    report = attn_doctor.check(config=fa2_config, quick=True)
    result = next(r for r in report.results if r.rule == "AD505")
    assert result.status == "error"
    assert report.exit_code == 1
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize("kwargs, words", [
    ({"python": "/no/such/python"}, "python=/no/such/python: no such file"),
    ({"fail_on": "sometimes"}, "fail_on"),
    ({"timeout": 0}, "timeout"),
    ({"config": [3]}, "config"),
    ({"cache_dir": __file__}, f"cache_dir={__file__}: not a folder"),
    ({"from_report": "report.json"}, "from_report diagnoses a recorded report; it cannot be combined with python or quick"),
])
def test_check_usage_errors(kwargs, words, capsys):
    # The API's messages name its parameters, never the command line's flags.
    with pytest.raises(UsageError, match=words.replace(".", r"\.")) as info:
        attn_doctor.check(quick=True, **kwargs)
    assert "--" not in str(info.value)
    assert capsys.readouterr() == ("", "")


def test_explain_names_its_python_parameter():
    with pytest.raises(UsageError, match="^python=/no/such/python: no such file$"):
        attn_doctor.explain("RuntimeError: x", check=True, python="/no/such/python")


def test_type_hints_resolve_to_the_real_classes():
    """typing.get_type_hints works on the API (forward references resolve), and the check's hints
    import no torch: a quick check's caller may have none."""
    code = textwrap.dedent("""
        import json, sys, typing
        import attn_doctor
        check = typing.get_type_hints(attn_doctor.check)
        out = {"check": check["return"].__module__ + "." + check["return"].__name__,
               "python": repr(check["python"]), "torch": "torch" in sys.modules}
        for name in ("explain", "trace", "preflight"):
            hints = typing.get_type_hints(getattr(attn_doctor, name))
            out[name] = hints["return"].__module__ + "." + hints["return"].__name__
        out["model"] = repr(typing.get_type_hints(attn_doctor.trace)["model"])
        result = typing.get_type_hints(attn_doctor.api.PreflightResult)
        out["report"] = result["report"].__name__
        print(json.dumps(out))
    """)
    proc = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {
        "check": "attn_doctor.report.Report", "python": "typing.Union[str, os.PathLike[str], NoneType]", "torch": False,
        "explain": "attn_doctor.explaining.report.ExplainReport", "trace": "attn_doctor.results.TraceReport",
        "preflight": "attn_doctor.results.PreflightResult", "model": "<class 'torch.nn.modules.module.Module'>", "report": "Report",
    }
    # PEP 561: the package says its annotations are meant for type checkers (the wheel ships it:
    # tests/realenv/test_install.py).
    assert (Path(attn_doctor.__file__).parent / "py.typed").is_file()


def test_check_records_the_steps_it_was_told_to_skip(capsys):
    """sample=False / smoke=False: the report says which parameter turned each off (the API's
    spelling), where a reader would otherwise have to guess."""
    report = attn_doctor.check(sample=False, smoke=False)
    assert report.facts.dtype_path.status == "skipped"
    assert report.facts.dtype_path.error == "not asked for (sample=False)"
    reasons = {r.rule: r.reason for r in report.results if r.status == "skipped"}
    assert reasons["AD601"] == "the sample forward pass did not run: not asked for (sample=False)"
    assert reasons["AD701"] == "no smoke tests ran: not asked for (smoke=False)"
    assert capsys.readouterr() == ("", "")


def test_check_bad_report_file_is_a_usage_error(tmp_path):
    bad = tmp_path / "report.json"
    bad.write_text('{"schema": "something/else"}')
    with pytest.raises(UsageError, match="not an attn-doctor report"):
        attn_doctor.check(from_report=bad)


# ---------------------------------------------------------------------------------------- explain


def test_explain_text_and_file(tmp_path, capsys):
    from attn_doctor.explaining.report import ExplainReport

    message = "RuntimeError: FlashAttention only supports Ampere GPUs or newer."
    report = attn_doctor.explain(message)
    assert isinstance(report, ExplainReport)
    assert report.exit_code == 1 and report.matches and report.matches[0].severity == "error"
    log = tmp_path / "train.log"
    log.write_text("step 1 loss 2.3\n" + message + "\n")
    from_file = attn_doctor.explain(file=log)
    assert [m.rule for m in from_file.matches] == [m.rule for m in report.matches]
    assert from_file.input.source == "file" and from_file.input.lines == 2
    assert attn_doctor.explain("all good, loss 1.9").exit_code == 0
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize("args, kwargs", [((), {}), (("x",), {"file": "y.log"}), ((), {"file": "/no/such.log"}),
                                          (("x",), {"python": "/no/such/python"})])
def test_explain_usage_errors(args, kwargs):
    with pytest.raises(UsageError):
        attn_doctor.explain(*args, **kwargs)


# ------------------------------------------------------------------------------------------ trace


def test_trace_finds_the_upcast_and_leaves_the_model_untouched(toy, capsys):
    import torch

    model = toy.Block(upcast=True)
    model.norm.weight.requires_grad_(False)  # a frozen parameter stays frozen
    model.eval()
    before = snapshot(model)
    flash_attn_before = "flash_attn" in sys.modules
    report = attn_doctor.trace(model, torch.randn(2, 8, 32), dtype="bf16", train=True)
    assert isinstance(report, attn_doctor.TraceReport)
    assert report.exit_code == 1 and not report.ok
    assert [f["id"] for f in report.errors] == ["AD602"]
    sink = report.errors[0]["sink"]
    assert sink["file"].endswith("toy_model.py") and "scaled_dot_product_attention" in sink["source"]
    assert any("copy of the model on meta" in n for n in report.notes)
    assert report.to_dict()["findings"] == report.findings
    assert_untouched(model, before)  # fp32 weights, same storage, eval mode, frozen norm
    # the flash_attn stand-in the tracer used is gone: a later `import flash_attn` is the real one
    assert ("flash_attn" in sys.modules) == flash_attn_before
    assert capsys.readouterr() == ("", "")


def test_trace_clean_model_with_autocast_and_torch_dtypes(toy):
    import torch

    report = attn_doctor.trace(toy.Block(), {"x": torch.randn(1, 4, 32)}, autocast=torch.bfloat16)
    assert report.status == "ok" and report.ok and report.findings == []
    assert report.summary["sinks"] == 1
    assert report.data["autocast"] == "bf16"


def test_trace_retries_on_a_cpu_copy_where_meta_cannot_run(toy):
    import torch

    model = toy.Block(data_dependent=True, upcast=True)
    before = snapshot(model)
    report = attn_doctor.trace(model, torch.randn(2, 8, 32), dtype="bf16")
    assert report.data["device"] == "cpu"
    assert any("retried on a CPU copy" in n for n in report.notes), report.notes
    assert [f["id"] for f in report.errors] == ["AD602"]
    assert_untouched(model, before)


def test_trace_of_a_wrapped_model_traces_the_inner_one(toy):
    import torch

    inner = toy.Block(upcast=True)
    wrapped = torch.nn.DataParallel(inner)  # on CPU it just holds the module
    before = snapshot(inner)
    report = attn_doctor.trace(wrapped, torch.randn(2, 8, 32), dtype="fp16")
    assert [f["id"] for f in report.errors] == ["AD602"]
    assert_untouched(inner, before)


def test_trace_errors(toy):
    import torch

    with pytest.raises(UsageError, match="nn.Module"):
        attn_doctor.trace("mypkg:build")
    with pytest.raises(UsageError, match="dtype"):
        attn_doctor.trace(toy.Block(), torch.randn(1, 4, 32), dtype="int8")
    with pytest.raises(UsageError, match="example inputs"):
        attn_doctor.trace(toy.Block())  # no inputs, and no embedding to make token ids for
    # the model's own raise is a finding at its line (AD621), not a failure of the trace
    report = attn_doctor.trace(toy.Block(broken=True), torch.randn(1, 4, 32))
    line = MODEL_SOURCE.splitlines().index('            raise ValueError("the user\'s forward is broken")') + 1
    (crash,) = [f for f in report.findings if f["id"] == "AD621"]
    assert crash["severity"] == "error" and "the user's forward is broken" in crash["message"], crash
    assert "toy_model.py:%d" % line in crash["message"] and report.exit_code == 1, crash


# -------------------------------------------------------------------------------------- preflight


def test_preflight_passes_and_logs_the_rest(caplog, capsys):
    caplog.set_level(logging.WARNING, logger="attn_doctor")
    result = attn_doctor.preflight(quick=True)
    assert result.ok and result.failed == () and result.rank is None and result.fleet is None
    assert result.report.facts.quick
    warned = [f for f in result.findings if f.severity == "warning"]
    logged = [r.getMessage() for r in caplog.records if r.name == "attn_doctor"]
    assert len(logged) == len(warned) and all(f.rule in m for f, m in zip(warned, logged))
    assert capsys.readouterr() == ("", "")


def test_preflight_raises_with_the_findings(fa2_config, capsys):
    with pytest.raises(PreflightError) as info:
        attn_doctor.preflight(config=fa2_config, quick=True)
    error = info.value
    assert [f.rule for f in error.findings] == ["AD505"]
    assert error.findings[0].severity == "error" and error.findings[0].source == "check"
    assert error.findings[0].remedies  # what to do travels with it
    assert "AD505" in str(error) and "flash_attention_2" in str(error)
    assert error.result is not None and error.result.report.exit_code == 1 and not error.result.ok
    assert capsys.readouterr() == ("", "")


def test_preflight_warn_mode_logs_instead(fa2_config, caplog):
    caplog.set_level(logging.WARNING, logger="attn_doctor")
    result = attn_doctor.preflight(config=[fa2_config], quick=True, on_failure="warn")
    assert not result.ok and [f.rule for f in result.failed] == ["AD505"]
    assert any("AD505" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)


def test_preflight_fail_on_warning_counts_warnings(caplog):
    # Which warnings fire depends on the machine (no GPU: AD101); whatever they are, they decide.
    caplog.set_level(logging.WARNING, logger="attn_doctor")
    lenient = attn_doctor.preflight(quick=True, on_failure="warn")
    warnings_here = [f.rule for f in lenient.findings if f.severity == "warning"]
    if warnings_here:
        with pytest.raises(PreflightError) as info:
            attn_doctor.preflight(quick=True, fail_on="warning")
        assert [f.rule for f in info.value.findings] == warnings_here
    else:
        assert attn_doctor.preflight(quick=True, fail_on="warning").ok


def test_preflight_traces_the_model(toy, capsys):
    import torch

    model = toy.Block(upcast=True)
    before = snapshot(model)
    with pytest.raises(PreflightError) as info:
        attn_doctor.preflight(model, example_inputs=torch.randn(2, 8, 32), dtype="bf16", quick=True)
    trace_findings = [f for f in info.value.findings if f.source == "trace"]
    assert [f.rule for f in trace_findings] == ["AD602"]
    assert trace_findings[0].where.endswith("toy_model.py:%d" % (MODEL_SOURCE.splitlines().index(
        "        o = F.scaled_dot_product_attention(q, k, v)") + 1))
    assert info.value.result.trace is not None and info.value.result.trace.exit_code == 1
    assert_untouched(model, before)
    clean = attn_doctor.preflight(toy.Block(), example_inputs=torch.randn(2, 8, 32), dtype="bf16", quick=True)
    assert clean.ok and clean.trace.ok
    assert capsys.readouterr() == ("", "")


def test_preflight_stops_a_forward_pass_that_raises(toy, caplog):
    # The sample forward raised: training raises the same at step 1, so it is an error naming the line,
    # never a "could not be traced" warning that lets training start.
    import torch

    with pytest.raises(PreflightError) as info:
        attn_doctor.preflight(toy.Block(broken=True), example_inputs=torch.randn(2, 8, 32), quick=True)
    (crash,) = [f for f in info.value.findings if f.source == "trace"]
    line = MODEL_SOURCE.splitlines().index('            raise ValueError("the user\'s forward is broken")') + 1
    # the trace names the line that raised (AD621); training stops there at its first step
    assert (crash.rule, crash.severity) == ("AD621", "error")
    assert "toy_model.py:%d" % line in (crash.where or "") + crash.message, crash
    assert "the user's forward is broken" in crash.message
    assert crash.message.endswith(": training stops there at its first step"), crash
    assert crash in info.value.result.failed
    caplog.set_level(logging.WARNING, logger="attn_doctor")
    warned = attn_doctor.preflight(toy.Block(broken=True), example_inputs=torch.randn(2, 8, 32), quick=True,
                                   on_failure="warn")
    assert not warned.ok and any("AD621" in r.getMessage() for r in caplog.records)


def test_preflight_usage_errors(toy):
    with pytest.raises(UsageError, match="on_failure"):
        attn_doctor.preflight(quick=True, on_failure="ignore")
    with pytest.raises(UsageError, match="init_process_group"):
        attn_doctor.preflight(quick=True, distributed=True)
    with pytest.raises(UsageError, match="example inputs"):
        attn_doctor.preflight(toy.Block(), quick=True)


DISTRIBUTED_SCRIPT = '''
import json, os, socket, sys
import torch.distributed as dist
import torch.multiprocessing as mp
import attn_doctor


def record(out, name, **kwargs):
    try:
        result = attn_doctor.preflight(quick=True, **kwargs)
        error = None
    except attn_doctor.PreflightError as exc:
        result, error = exc.result, exc
    fleet = result.fleet
    out[name] = {
        "raised": error is not None, "ok": result.ok, "rank": result.rank,
        "failed": [[f.source, f.rule, list(f.ranks)] for f in result.failed],
        "fleet": None if fleet is None else {"received": fleet.summary.received, "exit_code": fleet.exit_code},
    }


def rank_main(rank, folder, config):
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2")
    dist.init_process_group("gloo", rank=rank, world_size=2)
    out = {}
    record(out, "clean")
    # Only rank 1 asks for flash_attention_2: rank 1 fails on its own facts, rank 0 through the fleet.
    record(out, "rank1-fails", config=[config] if rank == 1 else None)
    record(out, "warn", config=[config] if rank == 1 else None, on_failure="warn")
    with open(os.path.join(folder, "rank%d.json" % rank), "w") as fh:
        json.dump(out, fh)
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    # fork: torch is imported once, not once per rank (seconds each on a small CI machine)
    mp.start_processes(rank_main, args=(sys.argv[1], sys.argv[2]), nprocs=2, start_method="fork")
'''


def test_preflight_under_torch_distributed_two_gloo_ranks(tmp_path, fa2_config):
    # Two real gloo ranks (torch.multiprocessing) in a process group the "training script" formed.
    script = tmp_path / "train.py"
    script.write_text(DISTRIBUTED_SCRIPT)
    proc = subprocess.run([sys.executable, str(script), str(tmp_path), str(fa2_config)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rank0 = json.loads((tmp_path / "rank0.json").read_text())
    rank1 = json.loads((tmp_path / "rank1.json").read_text())

    assert rank0["clean"] == {"raised": False, "ok": True, "rank": 0, "failed": [],
                              "fleet": {"received": 2, "exit_code": rank0["clean"]["fleet"]["exit_code"]}}
    assert rank1["clean"] == {"raised": False, "ok": True, "rank": 1, "failed": [], "fleet": None}

    # rank 0's own check is clean; it fails because the fleet does, naming rank 1
    assert rank0["rank1-fails"]["raised"] and rank0["rank1-fails"]["fleet"] == {"received": 2, "exit_code": 1}
    assert ["fleet", "AD505", [1]] in rank0["rank1-fails"]["failed"]
    assert rank1["rank1-fails"]["raised"] and rank1["rank1-fails"]["failed"] == [["check", "AD505", []]]

    assert not rank0["warn"]["raised"] and not rank0["warn"]["ok"]
    assert not rank1["warn"]["raised"] and not rank1["warn"]["ok"]
    # rank 0 reports the fleet in warn mode; the other ranks stay quiet rather than repeat it
    assert "AD505" in proc.stderr


def test_preflight_error_says_the_fix_of_each_trace_finding(toy, capsys):
    import torch

    model = toy.Block(upcast=True).to(torch.bfloat16)
    x = torch.randn(2, 8, 32, dtype=torch.bfloat16)
    with pytest.raises(PreflightError) as info:
        attn_doctor.preflight(model, example_inputs=(x,), quick=True, distributed=False)
    text = str(info.value)
    (finding,) = [f for f in info.value.findings if f.rule.startswith("AD6")]
    assert finding.remedies and "toy_model.py:" in finding.remedies[0]
    assert "q = q.to(v.dtype)" in finding.remedies[0] and "attn-doctor fix --trace applies it" in finding.remedies[0]
    assert "\n    fix: at " in text
    assert info.value.result is not None and info.value.result.ok is False


def test_a_model_without_example_inputs_is_told_in_the_apis_words():
    import torch.nn as nn

    with pytest.raises(UsageError) as info:
        attn_doctor.trace(nn.Sequential(nn.Linear(8, 8)))
    assert str(info.value).startswith("the model has no example inputs") and "pass example_inputs=" in str(info.value)
    assert "factory" not in str(info.value)
