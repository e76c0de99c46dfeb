"""A stand-in for attn_doctor/probes/target/gpu_child.py at the hardware boundary (no GPU here): one fake
H100-class device, and smoke groups that append their name to $SMOKE_RUNS each time they run.
SMOKE_CRASH=1 makes the group report a crash (signal 11), as a broken kernel would."""

import os


def cuda_facts():
    return {"status": "ok", "cuda_available": True,
            "devices": [{"index": 0, "name": "Fake GPU", "capability": "9.0", "bf16_native": True}]}


LIBRARIES = {}
COMPILED = {}


def smoke_groups(capability, libraries=(), compiled=(), numerics=True, numerics_only=()):
    return ["main"]


def run_smoke_group(group, index=0, groups=None, shapes=None, kernel_cache=None, capability=None, budget_s=None):
    with open(os.environ["SMOKE_RUNS"], "a") as fh:
        fh.write(group + "\n")
    if os.environ.get("SMOKE_CRASH"):
        return {"status": "crashed", "signal": 11}
    return {"status": "ok", "choices": [{"dtype": "bfloat16", "head_dim": 128, "backend": "flash_attention"}],
            "results": [{"backend": "sdpa-flash", "dtype": "bfloat16", "status": "ok", "rel_err": 0.004,
                         "rel_err_grad": 0.006, "tolerance": 0.04, "kernel_ms": 0.3}]}
