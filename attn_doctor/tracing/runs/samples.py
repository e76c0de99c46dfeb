"""The sample forward passes ``check`` runs: one per attention path installed here.

``run_sample_forward(device="auto", dtype="bf16", autocast=None, capability=None, samples=None)``
returns a JSON-able dict: {"schema", "status", "verdict" ("pass" | "warning" | "error" |
"failed"), "device", "dtype", "autocast", "samples": [{"name", "status" ("ran" | "skipped" |
"failed"), "reason", "summary", "findings", "sinks"}], "findings": [... each with "sample"],
"exit_code"}. A sample whose library is not installed is skipped, not failed.

The sample models live in this file on purpose: a finding in one points at a line in a library
(x-transformers' rotary code, transformers' attention wrapper) or at the kernel's rules, not here.
"""

from __future__ import annotations

import importlib.util

SCHEMA = "attn-doctor.sample/1"


def _installed(name):
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _block_model(use_flash):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Attention(nn.Module):
        def __init__(self, dim=64, heads=4):
            super().__init__()
            self.heads, self.head_dim = heads, dim // heads
            self.qkv = nn.Linear(dim, 3 * dim, bias=False)
            self.out = nn.Linear(dim, dim, bias=False)
            inv = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
            self.register_buffer("inv_freq", inv, persistent=False)

        def forward(self, x):
            b, s, c = x.shape
            q, k, v = self.qkv(x).view(b, s, 3, self.heads, self.head_dim).unbind(2)
            t = torch.arange(s, device=x.device, dtype=torch.float32)
            freqs = torch.outer(t, self.inv_freq.float())
            emb = torch.cat((freqs, freqs), -1)[None, :, None, :]
            cos, sin = emb.cos().to(q.dtype), emb.sin().to(q.dtype)
            q = q * cos + torch.cat((-q[..., self.head_dim // 2:], q[..., : self.head_dim // 2]), -1) * sin
            k = k * cos + torch.cat((-k[..., self.head_dim // 2:], k[..., : self.head_dim // 2]), -1) * sin
            if use_flash:
                from flash_attn import flash_attn_func

                o = flash_attn_func(q, k, v, causal=True)
            else:
                o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                   is_causal=True).transpose(1, 2)
            return self.out(o.reshape(b, s, c))

    class Block(nn.Module):
        def __init__(self, dim=64):
            super().__init__()
            self.norm = nn.LayerNorm(dim)
            self.attn = Attention(dim)

        def forward(self, x):
            return x + self.attn(self.norm(x))

    return nn.Sequential(Block(), Block())


def _sdpa_block(torch, device):
    return _block_model(False), (torch.randn(2, 16, 64),)


def _flash_block(torch, device):
    return _block_model(True), (torch.randn(2, 16, 64),)


# Optional libraries transformers imports at start-up when they are installed, and does without
# when they are not (its own availability checks): scikit-learn (assisted generation), TensorFlow,
# JAX / Flax, SciPy (the object-detection losses, 0.45 s), torchvision and torchaudio (image and
# audio utilities). A decoder's forward pass never uses them; on a node that has them they cost
# seconds of the cold check. The samples run in one-shot processes, so they are hidden there for good.
_NOT_FOR_A_FORWARD_PASS = ("sklearn", "tensorflow", "jax", "flax", "scipy", "torchvision", "torchaudio")


def _lean_transformers_import(distributions=None):
    """What transformers' import needs no more of in a one-shot sample process.

    distributions: importlib.metadata.packages_distributions() of this interpreter, computed ahead
    (the sample child does it in a fork while torch imports): transformers 5 calls it at import to
    map modules to distributions, which reads every installed distribution's RECORD (0.6-1.3 s on
    a node with 200 distributions). Same function, same environment: the same answer, earlier.
    """
    import os
    import sys

    for name in ("USE_TF", "USE_JAX", "USE_FLAX"):
        os.environ.setdefault(name, "0")
    for name in _NOT_FOR_A_FORWARD_PASS:
        sys.modules.setdefault(name, None)  # find_spec() then says "not installed"; import raises ImportError
    if distributions is not None:
        import importlib.metadata

        importlib.metadata.packages_distributions = lambda: {k: list(v) for k, v in distributions.items()}


def _plain_models_package():
    """transformers.models as a plain package. Its __init__ builds a lazy table of every model's
    public names by reading the source of each of its 1,000 files (transformers 5: 0.8-1.3 s on a
    GPU node); importing one model's modules by their full names needs none of it."""
    import importlib.util
    import sys

    import transformers

    if "transformers.models" in sys.modules:
        return
    spec = importlib.util.find_spec("transformers.models")
    if spec is None or not spec.submodule_search_locations:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["transformers.models"] = module
    setattr(transformers, "models", module)


def _import_llama():
    """LlamaConfig and LlamaForCausalLM: the modeling module that is traced, and nothing else of
    transformers' lazy namespace. Where the plain models package is not enough for a release, it is
    imported again the ordinary way: slower, never wrong."""
    import sys

    try:
        _plain_models_package()
        from transformers.models.llama.configuration_llama import LlamaConfig
        from transformers.models.llama.modeling_llama import LlamaForCausalLM
    except Exception as exc:  # noqa: BLE001 - any failure of the short cut: start over without it
        for key in [k for k in sys.modules if k == "transformers" or k.startswith("transformers.")]:
            del sys.modules[key]
        # Evidence for a slow sample, in the probe's captured output (check -v, the JSON's probes).
        print("attn-doctor: transformers imported whole: importing the Llama modules alone failed (%s: %s)"
              % (type(exc).__name__, str(exc).splitlines()[0][:200] if str(exc) else ""), file=sys.stderr)
        from transformers.models.llama.configuration_llama import LlamaConfig
        from transformers.models.llama.modeling_llama import LlamaForCausalLM
    return LlamaConfig, LlamaForCausalLM


def _tiny_llama(impl):
    def build(torch, device):  # after _lean_transformers_import (run_sample_forward, for each transformers sample)
        LlamaConfig, LlamaForCausalLM = _import_llama()
        config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, vocab_size=128,
                             max_position_embeddings=64)
        config._attn_implementation = "sdpa"
        model = LlamaForCausalLM(config)
        # transformers refuses flash_attention_2 at build time without a GPU; the forward pass reads
        # the implementation from the config, so switch it after building.
        from .hf_models import set_attn_implementation

        set_attn_implementation(model, impl)
        return model, {"input_ids": torch.zeros(1, 16, dtype=torch.long)}

    return build


def _x_transformers(torch, device):
    from x_transformers import Decoder, TransformerWrapper

    model = TransformerWrapper(num_tokens=128, max_seq_len=64,
                               attn_layers=Decoder(dim=64, depth=2, heads=4, rotary_xpos=True, attn_flash=True))
    return model, (torch.zeros(1, 16, dtype=torch.long),)


def _fla_layer(torch, device):
    # fla's layer constructors differ between releases [unverified across versions]; try a few.
    import fla.layers as layers

    last = None
    for cls_name, kwargs in (("RWKV7Attention", {"hidden_size": 64, "head_dim": 16, "num_heads": 4}),
                             ("GatedLinearAttention", {"hidden_size": 64, "num_heads": 4}),
                             ("MultiScaleRetention", {"hidden_size": 64, "num_heads": 4})):
        cls = getattr(layers, cls_name, None)
        if cls is None:
            continue
        try:
            return cls(**kwargs), (torch.randn(1, 16, 64),)
        except TypeError as exc:
            last = exc
    raise RuntimeError("no fla layer could be built with the sample arguments (%s)" % last)


def sample_table():
    """name -> (needs, builder). needs: modules that must be installed for the sample to run."""
    table = [
        ("sdpa_block", (), _sdpa_block),
        ("flash_attn_block", (), _flash_block),  # real flash_attn, or the stand-in off the GPU
        ("transformers_sdpa", ("transformers",), _tiny_llama("sdpa")),
        ("transformers_flash_attention_2", ("transformers", "flash_attn"), _tiny_llama("flash_attention_2")),
        ("x_transformers", ("x_transformers", "einops"), _x_transformers),
        ("fla_layer", ("fla",), _fla_layer),
    ]
    return table


def kernel_sites(sinks):
    """The kernel at each call site (one entry per file:line and kernel, with how many calls)."""
    sites = {}
    for s in sinks:
        k = s.get("kernel") or {}
        key = (s.get("file"), s.get("line"), k.get("name"))
        if k.get("label") and key in sites:
            sites[key]["count"] += 1
        elif k.get("label"):
            sites[key] = {"name": k.get("name"), "label": k["label"], "source": k.get("source"), "for": k.get("for"),
                          "file": s.get("file"), "line": s.get("line"), "count": 1}
    return list(sites.values())


def _as_sample_finding(finding, name):
    """A finding of the doctor's own sample model, in words about the environment: its place is "the
    sample NAME" (the doctor's copy of this file is gone after the run), and where the library the
    call went to is not installed (a stand-in judged it), it is a note about what the job would meet
    if it installed that library, never an error about this environment."""
    import os

    from ..places import SAMPLES_FILE

    f = dict(finding, sample=name)
    sink = dict(f.get("sink") or {})
    path = sink.get("file") or ""
    if path and os.path.basename(path) == os.path.basename(SAMPLES_FILE):
        where = "%s:%s" % (path, sink.get("line"))
        f["message"] = str(f.get("message", "")).replace(where, "attn-doctor's sample %s" % name).replace(
            path, "attn-doctor's sample %s" % name)
        sink.update(file="<attn-doctor sample %s>" % name, line=None, source=None)
        f["sink"] = sink
        f["patch"] = None
    if sink.get("standin") and f.get("severity") in ("error", "warning"):
        library = {"flash_attn2": "flash-attn", "flash_attn3": "FlashAttention 3", "flash_attn4": "FlashAttention 4",
                   "xformers": "xformers", "sage": "SageAttention"}.get(sink.get("family"), "its library")
        f["message"] = "%s is not installed here (judged with a stand-in): if the job installs it, %s" % (library, f["message"])
        f["severity"] = "info"
        f["standin"] = True
    return f


def run_sample_forward(device="auto", dtype="bf16", autocast=None, capability=None, samples=None,
                       distributions=None):
    """distributions: importlib.metadata.packages_distributions() computed ahead (see
    _lean_transformers_import), or None."""
    from .api import trace
    from ..errors import EXIT_CLEAN, EXIT_FAILED, EXIT_FINDINGS

    out = {"schema": SCHEMA, "status": "ok", "dtype": dtype, "autocast": autocast, "samples": [], "findings": []}
    try:
        import torch
    except BaseException as exc:  # noqa: BLE001
        out.update(status="failed", verdict="failed", exit_code=EXIT_FAILED,
                   error={"kind": "environment", "message": "torch does not import: %s" % exc})
        return out
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "meta"
    out["device"] = device
    if device == "cuda" and capability is None:
        capability = tuple(torch.cuda.get_device_capability())
    from ..standins import registry as standins

    had_standin = standins.standin_installed()
    try:
        for name, needs, builder in sample_table():
            if samples and name not in samples:
                continue
            entry = {"name": name}
            missing = [m for m in needs if not _installed(m)]
            if missing:
                entry.update(status="skipped", reason="%s not installed" % ", ".join(missing))
                out["samples"].append(entry)
                continue
            if "transformers" in needs:
                _lean_transformers_import(distributions)
            try:
                # Tiny models: built on the CPU (parameter init on meta goes through torch._refs and
                # imports torch._dynamo, 1.4 s), then moved by trace() to the device.
                with torch.device("cpu"):
                    model, inputs = builder(torch, device)
            except BaseException as exc:  # noqa: BLE001
                entry.update(status="failed", reason="building the sample failed: %s: %s" % (type(exc).__name__,
                                                                                           str(exc)[:300]))
                out["samples"].append(entry)
                continue
            # the check's samples are the installed libraries' own code at known shapes: recognised
            # forms suffice there, and a float64 shadow would add a CPU run to every check
            report = trace(model=model, inputs=inputs, dtype=dtype, autocast=autocast, device=device,
                           capability=capability, shadow=False)
            entry.update(status="ran" if report["status"] in ("ok", "partial") else "failed",
                         summary=report["summary"], findings=report["findings"],
                         sinks=[dict({k: s.get(k) for k in ("name", "file", "line", "module_path", "effective_dtypes",
                                                            "head_dim", "ok")}, kernel=(s.get("kernel") or {}).get("label"))
                                for s in report["sinks"][:8]],
                         kernels=kernel_sites(report["sinks"]), notes=report.get("notes", []))
            if report.get("error"):
                entry["reason"] = report["error"]["message"]
            for f in report["findings"]:
                out["findings"].append(_as_sample_finding(f, name))
            out["samples"].append(entry)
    finally:
        # A sample run in a fork ends with os._exit, which runs no atexit handler: the flash_attn
        # stand-in this call put in place goes now (its metadata folder would stay in /tmp).
        if not had_standin and standins.standin_installed():
            standins.remove_standins()
    errors = [f for f in out["findings"] if f["severity"] == "error"]
    warnings = [f for f in out["findings"] if f["severity"] == "warning"]
    failed = [s for s in out["samples"] if s["status"] == "failed"]
    out["verdict"] = "error" if errors else ("failed" if failed else ("warning" if warnings else "pass"))
    out["exit_code"] = EXIT_FINDINGS if errors else (EXIT_FAILED if failed else EXIT_CLEAN)
    out["summary"] = {"errors": len(errors), "warnings": len(warnings),
                      "ran": sum(1 for s in out["samples"] if s["status"] == "ran"),
                      "skipped": sum(1 for s in out["samples"] if s["status"] == "skipped"),
                      "failed": len(failed)}
    return out
