"""No renderer crops (issue 15): every command, piped and on a terminal of 80 and 200 columns.

Piped (a Slurm log, CI, `| tee`), each long evidence string must sit whole on one line, whatever
COLUMNS the job inherited. On a terminal (a real pseudo-terminal, as a user's shell gives), lines
follow the terminal's width, or COLUMNS where set, and wrap or fold: every character of the
evidence must still be there, and no ellipsis. The inputs are real: recorded facts files with
long paths and versions, a model in a deep folder traced with torch on the meta device, a log
with a long line, configs in a long path, a folder of `check --json` reports.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import pty
import re
import shutil
import struct
import subprocess
import sys
import termios
import textwrap
from pathlib import Path

import pytest
from rich.cells import cell_len

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
FACTS = FIXTURES / "facts"

# A venv deep in a shared project folder, and a local torch build's version: the strings that
# 80 columns used to cut.
LONG_VENV = "/shared/projects/" + "/".join(["multimodal_pretraining_cluster_environments_2026"] * 3) + "/envs/ft-flash-attention-bf16"
LONG_TORCH = "2.6.0a0+git7f3c2d1e9b8a4f6e5d0c1b2a39485766.nv25.01.cu124.internal.build20260101"
LONG_SO = LONG_VENV + "/lib/python3.11/site-packages/flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so"
WHEEL = "flash_attn-2.7.4.post1+cu12torch2.6cxx11abiFALSE-cp311-cp311-linux_x86_64.whl"
DEEP = "/".join(["a_research_group_with_a_long_name_for_its_model_code"] * 3)
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
GUIDES = re.compile(r"[\s│├└─]+")  # wrapping and tree guides: what a terminal layout may put inside a token


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")}
    env.update(PYTHONWARNINGS="ignore", **extra)
    return env


def piped(*args, cwd=None, **extra) -> subprocess.CompletedProcess:
    """The command with stdout a pipe, as in a job log. COLUMNS=80 is what a batch job inherits
    from the shell that submitted it (sbatch exports the environment): it must not cut the log."""
    return subprocess.run([sys.executable, "-m", "attn_doctor", *args], capture_output=True, text=True, cwd=cwd,
                          env=_env(COLUMNS="80", **extra), stdin=subprocess.DEVNULL, timeout=300)


def on_terminal(*args, columns: int, env_columns: str | None = None, cwd=None, **extra) -> tuple[int, str]:
    """The command with stdout a real pseudo-terminal `columns` wide (COLUMNS set where given);
    returns its exit code and the text shown, without colour codes."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 60, columns, 0, 0))
    env = _env(**extra)
    if env_columns:
        env["COLUMNS"] = env_columns
    with open(os.devnull, "wb") as devnull:
        proc = subprocess.Popen([sys.executable, "-m", "attn_doctor", *args], stdin=subprocess.DEVNULL, stdout=slave,
                                stderr=devnull, cwd=cwd, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError as exc:  # EIO: the child closed the terminal
            if exc.errno != errno.EIO:
                raise
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    code = proc.wait(timeout=300)
    text = b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
    return code, ANSI.sub("", text)


def assert_whole_lines(out: str, *tokens: str) -> None:
    lines = out.splitlines()
    for token in tokens:
        assert any(token in line for line in lines), f"{token!r} is not whole on any line of:\n{out}"
    assert "…" not in out


def assert_folded_not_cropped(out: str, columns: int, *tokens: str, unwrapped=()) -> None:
    """On a terminal: every character of each token is shown (wrapping and folding may split it
    across lines), no ellipsis, and no line wider than the terminal but those printed unwrapped
    on purpose (a command to copy: the terminal wraps it, rich must not insert newlines into it)."""
    squashed = GUIDES.sub("", out)
    for token in tokens:
        assert GUIDES.sub("", token) in squashed, f"{token!r} lost characters at {columns} columns:\n{out}"
    assert "…" not in out
    wide = [line for line in out.splitlines() if cell_len(line) > columns and not any(u in line for u in unwrapped)]
    assert wide == [], f"lines wider than the {columns}-column terminal:\n" + "\n".join(wide)


TERMINALS = [pytest.param(80, None, id="tty80"), pytest.param(80, "200", id="tty80-COLUMNS200")]


# ---------------------------------------------------------------- check --from-report


@pytest.fixture(scope="module")
def long_facts(tmp_path_factory) -> Path:
    """A recorded A100 report whose venv lives in a deep shared folder, with a local torch build."""
    text = (FACTS / "flash-attn-undefined-symbol.json").read_text()
    text = text.replace("/home/dev/ft/.venv", LONG_VENV).replace("2.6.0+cu124", LONG_TORCH)
    path = tmp_path_factory.mktemp("facts") / "a100-long.json"
    path.write_text(text)
    return path


def test_check_piped_keeps_every_line_whole(long_facts):
    proc = piped("check", "--from-report", str(long_facts), "-v")
    assert proc.returncode == 1, proc.stderr
    assert len(LONG_SO) > 150
    assert_whole_lines(proc.stdout, f"Python 3.11.11 ({LONG_VENV}/bin/python)", f"library={LONG_SO},", WHEEL,
                       f"torch {LONG_TORCH}, CUDA 12.4", f"{LONG_VENV}/bin/python -m pip install --force-reinstall")


@pytest.mark.parametrize("columns,env_columns", TERMINALS)
def test_check_on_a_terminal_folds_and_never_crops(long_facts, columns, env_columns):
    code, out = on_terminal("check", "--from-report", str(long_facts), "-v", columns=columns, env_columns=env_columns)
    width = int(env_columns or columns)
    assert code == 1, out
    # the remedy's command is printed unwrapped so that it copies whole
    assert_folded_not_cropped(out, width, f"Python 3.11.11 ({LONG_VENV}/bin/python)", f"library={LONG_SO},", WHEEL,
                              f"torch {LONG_TORCH}, CUDA 12.4", unwrapped=[" -m pip install "])
    assert any(f"{LONG_VENV}/bin/python -m pip install --force-reinstall" in line for line in out.splitlines())
    assert max(cell_len(line) for line in out.splitlines() if " -m pip " not in line) > (80 if width > 80 else 60)


# ---------------------------------------------------------------- trace

MODEL = '''\
import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, dim=4096, heads=32):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.register_buffer("temperature", torch.ones(1))

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).transpose(1, 3).unbind(dim=2)
        temp = self.temperature.float()
        q = q * temp
        return F.scaled_dot_product_attention(q, k, v)


def build(device=None):
    # on the meta device: a long context costs nothing
    return Attention().to(torch.bfloat16), torch.randn(2, 131072, 4096, dtype=torch.bfloat16)
'''


@pytest.fixture(scope="module")
def deep_model(tmp_path_factory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("trace")
    folder = root / DEEP
    folder.mkdir(parents=True)
    (folder / "long_context_attention_with_a_learned_temperature.py").write_text(MODEL)
    rel = f"{DEEP}/long_context_attention_with_a_learned_temperature.py"
    assert len(rel) > 150
    return root, rel


TRACE_EVIDENCE = ["float32 operand: temp  (explicit cast Tensor.float at {rel}:16)",
                  "q float32[2, 32, 131072, 128], k bfloat16[2, 32, 131072, 128], v bfloat16[2, 32, 131072, 128]",
                  "sink F.scaled_dot_product_attention  {rel}:18", "--- a/{rel}", "+++ b/{rel}"]


def test_trace_piped_keeps_every_tree_line_whole(deep_model):
    root, rel = deep_model
    proc = piped("trace", f"{rel}:build", cwd=root)
    assert proc.returncode == 1, proc.stderr
    assert_whole_lines(proc.stdout, *(e.format(rel=rel) for e in TRACE_EVIDENCE))
    # each line as the renderer made it, not padded out to the unbounded width
    assert [line for line in proc.stdout.splitlines() if line.endswith(" " * 8)] == []


@pytest.mark.parametrize("columns,env_columns", TERMINALS)
def test_trace_on_a_terminal_folds_and_never_crops(deep_model, columns, env_columns):
    root, rel = deep_model
    code, out = on_terminal("trace", f"{rel}:build", columns=columns, env_columns=env_columns, cwd=root)
    assert code == 1, out
    assert_folded_not_cropped(out, int(env_columns or columns), *(e.format(rel=rel) for e in TRACE_EVIDENCE))


# ---------------------------------------------------------------- explain


@pytest.fixture(scope="module")
def long_log(tmp_path_factory) -> Path:
    log = tmp_path_factory.mktemp("logs") / "slurm-4242.out"
    log.write_text(textwrap.dedent(f"""\
        PyTorch version: 2.6.0+cu126
        Traceback (most recent call last):
          File "{LONG_VENV}/bin/train.py", line 3, in <module>
            import flash_attn
        ImportError: {LONG_SO}: undefined symbol: _ZN3c105ErrorC2ENS_14SourceLocationESs
        """))
    return log


def _first_explanation_words(rule_id: str, n: int = 40) -> str:
    from attn_doctor.rules.loader import load_recipes

    rule = next(r for r in load_recipes().rules if r.id == rule_id)
    return " ".join(rule.explanation.split()[:n])


def test_explain_piped_keeps_the_evidence_and_each_paragraph_on_one_line(long_log):
    proc = piped("explain", "--file", str(long_log))
    assert proc.returncode == 1, proc.stderr
    assert_whole_lines(proc.stdout, f"5: ImportError: {LONG_SO}: undefined symbol: _ZN3c105ErrorC2ENS_14SourceLocationESs",
                       # prose is not hard-wrapped in a log either: a paragraph stays one line
                       _first_explanation_words("AD301"))


@pytest.mark.parametrize("columns,env_columns", TERMINALS)
def test_explain_on_a_terminal_folds_and_never_crops(long_log, columns, env_columns):
    code, out = on_terminal("explain", "--file", str(long_log), columns=columns, env_columns=env_columns)
    assert code == 1, out
    assert_folded_not_cropped(out, int(env_columns or columns), f"5: ImportError: {LONG_SO}: undefined symbol: _ZN3c105ErrorC2ENS_14SourceLocationESs",
                              _first_explanation_words("AD301"), unwrapped=[" -m pip install ", "pip install --force"])


# ---------------------------------------------------------------- fix --dry-run


@pytest.fixture(scope="module")
def long_config(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("configs") / "/".join(["llamafactory_experiment_configs_for_the_t4_partition"] * 3)
    folder.mkdir(parents=True)
    path = folder / "train_lora_qwen2_7b_bf16_flash_attention.yaml"
    shutil.copyfile(FIXTURES / "configs" / "llamafactory_lora_bf16.yaml", path)
    assert len(str(path)) > 150
    return path


def _fix_args(config: Path) -> list[str]:
    return ["fix", "--from-report", str(FACTS / "t4.json"), "--config", str(config), "--dry-run"]


def test_fix_dry_run_piped_keeps_the_diff_headers_whole(long_config, tmp_path):
    before = long_config.read_bytes()
    proc = piped(*_fix_args(long_config), ATTN_DOCTOR_STATE_DIR=str(tmp_path / "state"))
    assert proc.returncode == 0, proc.stderr
    assert_whole_lines(proc.stdout, f"--- {long_config}", f"+++ {long_config}", f"In {long_config}: fp16: true, bf16: false",
                       "+flash_attn: sdpa    # FlashAttention-2: fastest on A100")
    assert long_config.read_bytes() == before


@pytest.mark.parametrize("columns,env_columns", TERMINALS)
def test_fix_dry_run_on_a_terminal_folds_and_never_crops(long_config, tmp_path, columns, env_columns):
    code, out = on_terminal(*_fix_args(long_config), columns=columns, env_columns=env_columns, ATTN_DOCTOR_STATE_DIR=str(tmp_path / "state"))
    assert code == 0, out
    assert_folded_not_cropped(out, int(env_columns or columns), f"--- {long_config}", f"+++ {long_config}",
                              f"In {long_config}: fp16: true, bf16: false")


# ---------------------------------------------------------------- fleet


@pytest.fixture(scope="module")
def reports(tmp_path_factory, long_facts) -> Path:
    """Three nodes' `check --json` reports: the odd one out in the long venv with the local torch build."""
    folder = tmp_path_factory.mktemp("reports")
    for name, facts in (("node-a100-12.json", FACTS / "a100.json"), ("node-a100-04.json", long_facts)):
        proc = piped("check", "--from-report", str(facts), "--json", "--output", str(folder / name))
        assert proc.returncode in (0, 1), proc.stderr
    shutil.copyfile(folder / "node-a100-12.json", folder / "node-a100-13.json")
    return folder


FLEET_EVIDENCE = [f"facts.imports.flash_attn.error.library: (absent) -> {LONG_SO}",
                  f"facts.torch.version: 2.5.1+cu124 -> {LONG_TORCH}", f"torch {LONG_TORCH} (CUDA 12.4)"]


def test_fleet_piped_keeps_each_difference_whole(reports):
    proc = piped("fleet", str(reports), "-v")
    assert proc.returncode == 1, proc.stderr
    assert_whole_lines(proc.stdout, *FLEET_EVIDENCE)


@pytest.mark.parametrize("columns,env_columns", TERMINALS)
def test_fleet_on_a_terminal_folds_and_never_crops(reports, columns, env_columns):
    code, out = on_terminal("fleet", str(reports), "-v", columns=columns, env_columns=env_columns)
    assert code == 1, out
    assert_folded_not_cropped(out, int(env_columns or columns), *FLEET_EVIDENCE)


# ---------------------------------------------------------------- rules


def _rules():
    from attn_doctor.rules.loader import load_recipes

    return list(load_recipes().rules)


def test_rules_piped_keeps_each_rule_on_one_line():
    proc = piped("rules")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    for rule in _rules():
        (row,) = [line for line in lines if line.startswith(rule.id + " ")]
        assert rule.name in row and row.rstrip().endswith(rule.title), row
    assert "…" not in proc.stdout


@pytest.mark.parametrize("columns,env_columns", TERMINALS)
def test_rules_on_a_terminal_keeps_every_name_whole(columns, env_columns):
    code, out = on_terminal("rules", columns=columns, env_columns=env_columns)
    assert code == 0, out
    assert_folded_not_cropped(out, int(env_columns or columns))
    words = set(out.split())
    for rule in _rules():
        # a table wraps titles at words; a name is one token that must stay whole
        assert rule.name in words, (rule.name, out)
        assert set(rule.title.split()) <= words, (rule.title, out)


def test_one_rule_piped_and_on_a_terminal():
    proc = piped("rules", "AD301")
    assert proc.returncode == 0, proc.stderr
    assert_whole_lines(proc.stdout, " ".join(_first_explanation_words("AD301", 10_000).split()[:60]))
    code, out = on_terminal("rules", "AD301", columns=80)
    assert code == 0
    assert_folded_not_cropped(out, 80, _first_explanation_words("AD301", 10_000))


# ---------------------------------------------------------------- the one console


def test_every_command_module_builds_its_console_in_one_place():
    """cli/*.py and render/*.py ask render.console for a console; none builds its own."""
    offenders = []
    for path in sorted((REPO / "attn_doctor").glob("*/*.py")):
        if path.parent.name in ("cli", "render") and path.name != "console.py" and re.search(r"\bConsole\(", path.read_text()):
            offenders.append(str(path.relative_to(REPO)))
    assert offenders == []


def test_the_console_follows_columns_on_a_terminal_and_has_no_width_in_a_pipe(monkeypatch):
    from attn_doctor.render.console import make_console, whole_lines

    monkeypatch.setenv("COLUMNS", "123")
    tty = make_console(terminal=True)
    assert tty.width == 123 and tty.is_terminal and not whole_lines(tty)
    monkeypatch.setenv("COLUMNS", "80")
    piped_console = make_console(terminal=False)
    assert whole_lines(piped_console) and piped_console.width > 10_000
    err = make_console(stderr=True, terminal=False)
    assert err.file is sys.stderr and whole_lines(err)
