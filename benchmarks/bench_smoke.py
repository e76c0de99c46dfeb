"""GPU smoke tests: what each backend's smoke test costs against a bare call of that backend.

    python benchmarks/bench_smoke.py          (on a GPU machine)

For each backend and native dtype, in one process, after a warm-up of both (so lazy CUDA module
loading is excluded from both sides):
  bare  = one forward + backward of the backend on the smoke shape (median of 20, synchronised)
  smoke = one whole smoke test of it: casting inputs, forward + backward, comparison with the
          float64 reference, and the timed runs it reports (median of 5)
The ratio is smoke / bare. The time `check` adds on a GPU node is in bench_check.py.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, installed or not

from attn_doctor.facts import BF16_NATIVE_FROM  # noqa: E402
from attn_doctor.probes.target import gpu_child  # noqa: E402

gpu_child.BF16_NATIVE_FROM = BF16_NATIVE_FROM  # what the torch probe hands the child in `check`


def wall_ms(fn, runs):
    times = []
    for _ in range(runs):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    if not torch.cuda.is_available():
        raise SystemExit("bench_smoke.py needs a CUDA GPU")
    gpu_child.OUT_FD = None
    device = "cuda:0"
    major = torch.cuda.get_device_capability(0)[0]
    dtypes = [torch.float16] + ([torch.bfloat16] if major >= 8 else [])
    gen = torch.Generator(device=device).manual_seed(0)
    inputs32 = [torch.randn(gpu_child.SHAPE, device=device, generator=gen) for _ in range(3)]
    grad32 = torch.randn(gpu_child.SHAPE, device=device, generator=gen)
    q64, k64, v64 = (t.double().requires_grad_(True) for t in inputs32)
    with gpu_child._sdpa_backends(torch)["sdpa-math"]():
        out64 = torch.nn.functional.scaled_dot_product_attention(q64, k64, v64, is_causal=True)
    gpu_child.backward(out64, grad32.double())
    ref = (out64.detach(), (q64.grad, k64.grad, v64.grad))

    def sdpa_call(make_ctx):
        def call(q, k, v):
            with make_ctx():
                return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

        return call

    backends = [(n, sdpa_call(c)) for n, c in gpu_child._sdpa_backends(torch).items()]
    libraries = gpu_child._library_backends(sorted(gpu_child.LIBRARIES))
    backends += [(n, f) for n, f in libraries.items() if not isinstance(f, BaseException)]
    print(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, shape {gpu_child.SHAPE} causal")
    print(f"{'backend':20} {'dtype':9} {'bare ms':>8} {'smoke ms':>9} {'ratio':>7}  status")
    for dtype in dtypes:
        for name, call in backends:
            q, k, v = (t.to(dtype).requires_grad_(True) for t in inputs32)
            g = grad32.to(dtype)

            def bare():
                q.grad = k.grad = v.grad = None
                gpu_child.backward(call(q, k, v), g)

            try:
                bare()  # warm-up: lazy module loading, cuDNN plans
                gpu_child.smoke_one(torch, name, call, dtype, ref, inputs32, grad32)
            except Exception as exc:  # noqa: BLE001 - a refusing backend is a row, not a crash
                print(f"{name:20} {str(dtype)[6:]:9} {'-':>8} {'-':>9} {'-':>7}  {type(exc).__name__}: {str(exc)[:60]}")
                continue
            bare_ms = wall_ms(bare, 20)
            results = []
            smoke_ms = wall_ms(lambda: results.append(gpu_child.smoke_one(torch, name, call, dtype, ref, inputs32, grad32)), 5)
            print(f"{name:20} {str(dtype)[6:]:9} {bare_ms:8.3f} {smoke_ms:9.3f} {smoke_ms / bare_ms:6.1f}x  {results[-1]['status']}")


if __name__ == "__main__":
    main()
