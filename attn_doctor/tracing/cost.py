"""What a fallback costs, measured: on a CUDA device the call as the model makes it is timed
against the fastest kernel that accepts the equivalent call (fallbacks.py), on the call's own
tensors; the finding then says "costs 2.35x the cuDNN kernel here". Off the GPU nothing is timed
and the finding says so.

The timing is the call as a training step runs it: forward, then (in a trace with grad enabled and
inputs that require it) backward from a gradient the shape of the output, the inputs' gradients
dropped rather than accumulated (in a model q, k and v are intermediates, not leaves). After
warm-up runs, ``ROUNDS`` rounds of ``RUNS`` calls go back to back between two CUDA events, and the
median of the rounds' means counts (a kernel's first rounds in a process, with cuDNN's plan cache
and the clocks still rising, must not decide a ratio): a synchronize after each call would add the
host's launch time to every call, which a training step hides behind the GPU's work. The equivalent call is timed the same way, forward and backward
whenever the call itself is, with each fused backend that accepts it forced alone
(torch.nn.attention.sdpa_kernel); the fastest counts.
"""

from __future__ import annotations

from . import sdpa_select

WARMUP = 3
RUNS = 20
ROUNDS = 3


def attach(problem, tracer, made, equivalent, eq_choice):
    """Put ``problem["cost"]``: measured on CUDA tensors, else why not. ``made`` and
    ``equivalent``: (q, k, v, mask, dropout, is_causal, enable_gqa) of the call and of its fix."""
    q = made[0]
    if q.device.type != "cuda":
        problem["cost"] = {"measured": False, "why": "not measured: the trace ran on %s (trace --device cuda times "
                                                      "the call against the fix)" % q.device.type}
        return
    tracer.in_sink += 1  # these SDPA calls are the doctor's, not the model's
    try:
        problem["cost"] = measure(made, equivalent, eq_choice)
    except Exception as exc:  # noqa: BLE001 - out of memory, a kernel refusing: the finding stands
        problem["cost"] = {"measured": False, "why": "not measured: %s: %s" % (type(exc).__name__,
                                                                                str(exc).splitlines()[0][:200])}
    finally:
        tracer.in_sink -= 1


def _runner(torch, call, train, backend=None):
    import contextlib

    q, k, v, mask, dropout, is_causal, enable_gqa = call
    leaves = [t.detach().requires_grad_(train) for t in (q, k, v)]
    extra = {"enable_gqa": True} if enable_gqa else {}
    if backend is not None:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        ctx = lambda: sdpa_kernel(getattr(SDPBackend, sdpa_select.MEMBERS[backend]))  # noqa: E731
    else:
        ctx = contextlib.nullcontext

    def run():
        with ctx():
            out = torch.nn.functional.scaled_dot_product_attention(*leaves, attn_mask=mask, dropout_p=dropout,
                                                                    is_causal=is_causal, **extra)
        if train:
            out.backward(grad)
            for t in leaves:
                t.grad = None

    # made once, as the step's upstream gradient is: no fill kernel timed with the call
    grad = torch.ones(*q.shape[:-1], v.shape[-1], dtype=q.dtype, device=q.device) if train else None
    return run


def time_ms(torch, run, rounds=ROUNDS):
    """Milliseconds per call: the median of `rounds` rounds' means of RUNS calls each."""
    for _ in range(WARMUP):
        run()
    torch.cuda.synchronize()
    means = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(RUNS):
            run()
        end.record()
        torch.cuda.synchronize()
        means.append(start.elapsed_time(end) / RUNS)
    return sorted(means)[len(means) // 2]


def measure(made, equivalent, eq_choice):
    import torch

    train = any(t.requires_grad for t in made[:3])
    with torch.enable_grad() if train else torch.no_grad():
        made_ms = time_ms(torch, _runner(torch, made, train))
        timings = {}
        for backend in eq_choice.get("accepts") or ():
            try:
                timings[backend] = time_ms(torch, _runner(torch, equivalent, train, backend))
            except RuntimeError:  # torch and the emulation may disagree on an edge: not this one
                continue
        if not timings:
            timings[eq_choice.get("kernel") or "math"] = time_ms(torch, _runner(torch, equivalent, train))
    fastest = min(timings, key=timings.get)
    ratio = made_ms / timings[fastest] if timings[fastest] > 0 else None
    return {"measured": True, "ms": round(made_ms, 4), "fastest": fastest, "fastest_ms": round(timings[fastest], 4),
            "ratio": round(ratio, 2) if ratio else None, "timed": "forward and backward" if train else "forward",
            "runs": RUNS, "rounds": ROUNDS, "alternatives_ms": {k: round(v, 4) for k, v in timings.items()}}


def describe(cost):
    """The words a finding ends with: "costs 2.35x the cuDNN kernel here", or why it was not timed."""
    if not cost:
        return None
    if not cost.get("measured"):
        return cost.get("why")
    how = ("median of %d rounds of %d" % (cost["rounds"], cost["runs"]) if cost.get("rounds", 1) > 1
           else "mean of %d" % cost["runs"])
    return "costs %.2fx the %s kernel here (%.3f ms against %.3f ms, %s, %s)" % (
        cost["ratio"] or 0, sdpa_select.LABELS.get(cost["fastest"], cost["fastest"]), cost["ms"], cost["fastest_ms"],
        cost["timed"], how)
