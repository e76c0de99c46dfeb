"""x-transformers 1.30.1 (rotary promotes q/k to fp32) and 1.30.2 (fixed), each installed by real
pip into a folder of its own, with a factory module beside them. From PyPI, or from a local
wheelhouse where there is no network (ATTN_DOCTOR_WHEELHOUSE=DIR holding the two wheels)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Optional

VERSIONS = ("1.30.1", "1.30.2")

FACTORY = textwrap.dedent("""
    import torch
    from x_transformers import TransformerWrapper, Decoder

    def build():
        model = TransformerWrapper(num_tokens=256, max_seq_len=64,
                                   attn_layers=Decoder(dim=64, depth=2, heads=4, rotary_xpos=True, attn_flash=True))
        return model.to(torch.bfloat16), torch.zeros(1, 64, dtype=torch.long)  # its max_seq_len
    """)


def install(root: Path) -> dict[str, str]:
    """version -> the folder it is installed in; raises RuntimeError with pip's words if pip cannot."""
    wheelhouse = os.environ.get("ATTN_DOCTOR_WHEELHOUSE")
    source = ["--no-index", "--find-links", wheelhouse] if wheelhouse else []
    import importlib.util

    # einops is x-transformers' one other need: installed beside it unless this environment has it
    extra = [] if importlib.util.find_spec("einops") else ["einops"]
    dirs = {}
    for version in VERSIONS:
        target = root / version
        proc = subprocess.run([*_installer(), *source, "--no-deps", "--target", str(target), "x-transformers==" + version, *extra],
                              capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise RuntimeError(f"could not install x-transformers {version}: {proc.stderr.strip()[-300:]}")
        dirs[version] = str(target)
    (root / "xt_factory.py").write_text(FACTORY)
    return dirs


def _installer(prefer_uv: bool = False) -> list[str]:
    """pip of this interpreter; uv's where the environment has no pip (uv creates venvs without one),
    or first where `prefer_uv` (its one shared cache: pip resolves and unpacks a large package for a minute)."""
    import importlib.util

    def uv() -> Optional[list[str]]:
        try:
            from uv import find_uv_bin

            return [find_uv_bin(), "pip", "install", "-q", "--python", sys.executable]
        except (ImportError, FileNotFoundError):  # FileNotFoundError: uv's package without its binary
            return None

    if prefer_uv and (found := uv()):
        return found
    if importlib.util.find_spec("pip"):
        return [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    found = uv()
    if found is None:
        raise RuntimeError("neither pip nor uv is installed in this environment")
    return found
