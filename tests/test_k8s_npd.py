"""examples/k8s/npd-attn-doctor.yaml run as node-problem-detector runs a custom plugin.

The harness follows NPD's plugin runner (pkg/custompluginmonitor/plugin/plugin.go): the rule's
path and args executed without a shell; the rule's timeout when below the global one, the
process killed at it; stdout read up to 4 KiB, whitespace trimmed, cut at max_output_length
bytes; exit 0 -> OK, 1 -> NonOK, anything else -> Unknown. The rule's path is the doctor's
console script in the image; here, the one beside this interpreter. What differs between the
cases is the environment the doctor judges (VIRTUAL_ENV), as it differs between nodes' images.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import venv
from pathlib import Path

import pytest
from ruamel.yaml import YAML

EXAMPLE = Path(__file__).parents[1] / "examples" / "k8s" / "npd-attn-doctor.yaml"
NPD_STDOUT_LIMIT = 4 * 1024  # maxCustomPluginBufferBytes
OK, NON_OK, UNKNOWN = "OK", "NonOK", "Unknown"


def _seconds(duration: str) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m|h)", duration)
    assert m, f"not a Go duration NPD parses here: {duration!r}"
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def npd_config() -> dict:
    doc = YAML(typ="safe").load(EXAMPLE.read_text())
    return json.loads(doc["data"]["attn-doctor-monitor.json"])


def run_plugin(rule: dict, config: dict, env: dict) -> tuple[str, str, float]:
    """(status, message, seconds) as NPD would set them from one run of `rule`."""
    plugin = config["pluginConfig"]
    timeout = _seconds(plugin["timeout"])
    if rule.get("timeout") and _seconds(rule["timeout"]) < timeout:
        timeout = _seconds(rule["timeout"])
    path = Path(sys.executable).parent / Path(rule["path"]).name  # the image's /usr/local/bin/attn-doctor
    start = time.monotonic()
    proc = subprocess.Popen([str(path), *rule.get("args", [])], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    killed = False
    try:
        stdout, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, _ = proc.communicate()
        killed = True
    seconds = time.monotonic() - start
    output = stdout[:NPD_STDOUT_LIMIT].decode("utf-8", "replace").strip()
    if killed:
        output = f"Timeout when running plugin {rule['path']!r}: output - {output!r}"
    output = output.encode()[: plugin.get("max_output_length", 80)].decode("utf-8", "replace")
    status = {0: OK, 1: NON_OK}.get(proc.returncode, UNKNOWN)
    return status, output, seconds


def _environment(root: Path, packages: dict[str, str]) -> Path:
    """A venv with `packages` (name -> version) installed as metadata alone."""
    venv.create(root, with_pip=False)
    site = next((root / "lib").glob("python3*/site-packages"))
    for name, version in packages.items():
        info = site / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (info / "RECORD").write_text("")
    return root


def _env(**extra) -> dict:
    e = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    e.update(COLUMNS="200", PYTHONWARNINGS="ignore", **extra)
    return e


@pytest.fixture(scope="module")
def rule_and_config():
    config = npd_config()
    assert config["plugin"] == "custom"
    (rule,) = config["rules"]
    assert rule["type"] == "permanent" and rule["condition"] in {c["type"] for c in config["conditions"]}
    return rule, config


def test_healthy_environment_is_ok_with_a_useful_message(rule_and_config, tmp_path):
    rule, config = rule_and_config
    # torch as a node's image has it (metadata only: --quick imports nothing); without torch the
    # node cannot train, which --quick says as the full check does (AD001)
    healthy = _environment(tmp_path / "env", {"torch": "2.13.0"})
    status, message, seconds = run_plugin(rule, config, _env(VIRTUAL_ENV=str(healthy)))
    assert status == OK and message.startswith("OK no errors"), message
    assert seconds < _seconds(config["pluginConfig"]["timeout"]) / 4, seconds


def test_an_error_finding_is_non_ok_and_its_rule_fits_the_message(rule_and_config, tmp_path):
    rule, config = rule_and_config
    broken = _environment(tmp_path / "env", {"torch": "2.13.0", "transformers": "4.40.0", "flash-attn": "2.0.4"})
    status, message, _ = run_plugin(rule, config, _env(VIRTUAL_ENV=str(broken)))
    assert status == NON_OK, message
    assert message.startswith("FAIL AD451 transformers-needs-newer-flash-attn"), message
    assert len(message.encode()) <= config["pluginConfig"]["max_output_length"] and message.isascii()


def test_a_node_without_torch_is_non_ok(rule_and_config, tmp_path):
    rule, config = rule_and_config
    status, message, _ = run_plugin(rule, config, _env(VIRTUAL_ENV=str(_environment(tmp_path / "env", {}))))
    assert status == NON_OK and message.startswith("FAIL AD001 torch-missing"), message


def test_a_check_that_cannot_run_is_unknown_not_a_problem(rule_and_config, tmp_path):
    # exit 2 (here: the environment's interpreter crashes) is Unknown to NPD, as exit 3 is
    crashing = tmp_path / "crashing" / "bin"
    crashing.mkdir(parents=True)
    (crashing / "python").write_text("#!/bin/sh\nkill -SEGV $$\n")
    (crashing / "python").chmod(0o755)
    rule, config = rule_and_config
    status, message, _ = run_plugin(rule, config, _env(VIRTUAL_ENV=str(crashing.parent)))
    assert status == UNKNOWN and message.startswith("UNKNOWN /") and message.endswith("killed by SIGSEGV)"), message
    assert len(message.encode()) <= config["pluginConfig"]["max_output_length"]


def test_the_plugins_whole_stdout_is_the_one_line():
    # NPD keeps the first bytes of all of stdout, not of its first line: --oneline prints one line
    proc = subprocess.run([sys.executable, "-m", "attn_doctor", "check", "--quick", "--oneline"], capture_output=True, text=True, timeout=120, env=_env())
    assert proc.stdout.count("\n") == 1 and len(proc.stdout.strip().encode()) <= 80, proc.stdout
    bad = subprocess.run([sys.executable, "-m", "attn_doctor", "check", "--oneline", "--json"], capture_output=True, text=True, timeout=60, env=_env())
    assert bad.returncode == 2 and "--oneline" in bad.stderr
