"""What a fallback costs, measured: on a CUDA device the call as the model makes it is timed
against its fix (fallbacks.py: the equivalent call, run as SDPA runs it, so the kernel timed is
the one the fix really gets), at the traced size and at a representative sequence length (the
model's own maximum where it states one, else ``DEFAULT_SEQ``); the finding then says "costs
against the cuDNN kernel the fix runs: 1.90x at seq 16 (...); 3.10x at seq 2048 (...)". A fix that
is faster at neither size leaves the finding as info, not a warning. Off the GPU nothing is timed
and the finding says so.

The timing is the call as a training step runs it: forward, then (in a trace with grad enabled and
inputs that require it) backward from a gradient the shape of the output, the inputs' gradients
dropped rather than accumulated (in a model q, k and v are intermediates, not leaves). After
warm-up runs, ``ROUNDS`` rounds of ``RUNS`` calls go back to back between two CUDA events, and the
median of the rounds' means counts (a kernel's first rounds in a process, with cuDNN's plan cache
and the clocks still rising, must not decide a ratio): a synchronize after each call would add the
host's launch time to every call, which a training step hides behind the GPU's work.
"""

from __future__ import annotations

from . import sdpa_select

WARMUP = 3
RUNS = 20
ROUNDS = 3


def attach(problem, tracer, made, equivalent, eq_choice):
    """Put ``problem["cost"]``: measured on CUDA tensors, else why not. ``made`` and
    ``equivalent``: (q, k, v, mask, dropout, is_causal, enable_gqa) of the call and of its fix. A fix
    that is not faster at the traced size nor at the representative one turns the finding to info."""
    q = made[0]
    if q.device.type != "cuda":
        problem["cost"] = {"measured": False, "why": "not measured: the trace ran on %s (trace --device cuda times "
                                                      "the call against the fix)" % q.device.type}
        return
    tracer.in_sink += 1  # these SDPA calls are the doctor's, not the model's
    try:
        problem["cost"] = measure(made, equivalent, eq_choice,
                                  representative=getattr(tracer, "representative_seq", None))
    except Exception as exc:  # noqa: BLE001 - out of memory, a kernel refusing: the finding stands
        problem["cost"] = {"measured": False, "why": "not measured: %s: %s" % (type(exc).__name__,
                                                                                str(exc).splitlines()[0][:200])}
    finally:
        tracer.in_sink -= 1
    cost = problem["cost"]
    if cost.get("measured") and not cost.get("fix_faster"):
        problem["severity"] = "info"


def _runner(torch, call, train, backend=None):
    import contextlib

    q, k, v, mask, dropout, is_causal, enable_gqa = call
    leaves = [t.detach().requires_grad_(train) for t in (q, k, v)]
    # a learned bias (T5's position bias) is part of the model's graph: the doctor's backward must not
    # reach it (it would free the graph the model's own backward needs, and add to its gradients)
    mask = mask.detach() if isinstance(mask, torch.Tensor) else mask
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


# Not faster means within this of the call's own time (rounds differ by a few percent).
FASTER = 0.95
# The sequence length a fix is also timed at when the model states none (a typical training length).
DEFAULT_SEQ = 2048
# A representative size whose tensors would take more than this is not timed.
MAX_BYTES = 4 << 30


def _seq_dim(t):
    return t.dim() - 2


def scaled(torch, call, seq):
    """The call at sequence length ``seq``: new q, k, v (and mask) of that length, laid out as the
    call's (a last dimension that is not contiguous stays so); a causal mask stays causal."""
    q, k, v, mask, dropout, is_causal, enable_gqa = call

    def like(t):
        shape = list(t.shape)
        shape[_seq_dim(t)] = seq
        if t.stride(-1) != 1 and t.shape[-1] != 1:
            swapped = shape[:-2] + [shape[-1], shape[-2]]
            return torch.randn(*swapped, dtype=t.dtype, device=t.device).transpose(-1, -2)
        return torch.randn(*shape, dtype=t.dtype, device=t.device)

    new_mask = None
    if mask is not None:
        shape = [1] * (mask.dim() - 2) + [seq, seq]
        causal = torch.ones(seq, seq, dtype=torch.bool, device=mask.device).tril()
        if mask.dtype == torch.bool:
            new_mask = causal.view(shape)
        else:
            new_mask = torch.zeros(seq, seq, dtype=mask.dtype, device=mask.device).masked_fill(
                ~causal, float("-inf")).view(shape)
    return (like(q), like(k), like(v), new_mask, dropout, is_causal, enable_gqa)


def _bytes(call, seq):
    q, k, v, mask = call[:4]
    per = sum(t.numel() // max(1, t.shape[_seq_dim(t)]) * t.element_size() for t in (q, k, v))
    return per * seq * 3 + (seq * seq * mask.element_size() if mask is not None else 0)


def measure(made, equivalent, eq_choice, representative=None):
    """The call and its fix, each as torch runs it (the fix's kernel is the one SDPA picks for it,
    not one forced), at the traced size and at ``representative`` ((seq, where the number comes
    from), default DEFAULT_SEQ): {"measured", "ms", "fix_ms", "ratio", "at": [...], "fix_faster"}."""
    import torch

    train = any(t.requires_grad for t in made[:3])
    seq, where = representative or (DEFAULT_SEQ, "a typical training length")
    traced_seq = int(made[0].shape[_seq_dim(made[0])])
    sizes = [(traced_seq, "the traced size")]
    seq = int(seq or 0)
    if seq > traced_seq and _bytes(made, seq) > MAX_BYTES:
        while seq > traced_seq and _bytes(made, seq) > MAX_BYTES:  # a 128k context: the largest that fits
            seq //= 2
        where = "%s, halved to fit in %d GiB" % (where, MAX_BYTES >> 30)
    if seq > traced_seq:
        sizes.append((seq, where))
    points = []
    with torch.enable_grad() if train else torch.no_grad():
        for n, why in sizes:
            call, fix = (made, equivalent) if n == traced_seq else (scaled(torch, made, n), scaled(torch, equivalent, n))
            made_ms = time_ms(torch, _runner(torch, call, train))
            fix_ms = time_ms(torch, _runner(torch, fix, train))
            points.append({"seq": n, "why": why, "ms": round(made_ms, 4), "fix_ms": round(fix_ms, 4),
                           "ratio": round(made_ms / fix_ms, 2) if fix_ms > 0 else None})
    first = points[0]
    return {"measured": True, "fix_kernel": eq_choice.get("kernel"), "ms": first["ms"], "fix_ms": first["fix_ms"],
            "ratio": first["ratio"], "at": points,
            "fix_faster": any(p["fix_ms"] < FASTER * p["ms"] for p in points),
            "timed": "forward and backward" if train else "forward", "runs": RUNS, "rounds": ROUNDS}


def describe(cost):
    """The words a finding ends with: "costs 2.35x the cuDNN kernel the fix runs (at seq 16: ...; at seq
    2048, the model's max_position_embeddings: ...)", or why it was not timed."""
    if not cost:
        return None
    if not cost.get("measured"):
        return cost.get("why")
    kernel = sdpa_select.LABELS.get(cost.get("fix_kernel"), cost.get("fix_kernel") or "other")
    how = ("median of %d rounds of %d" % (cost["rounds"], cost["runs"]) if cost.get("rounds", 1) > 1
           else "mean of %d" % cost["runs"])
    parts = ["%.2fx at seq %d (%s: %.3f ms against %.3f ms)" % (p["ratio"] or 0, p["seq"], p["why"], p["ms"],
                                                               p["fix_ms"]) for p in cost.get("at") or ()]
    if cost.get("fix_faster"):
        head = "costs against the %s kernel the fix runs: " % kernel
    else:
        head = "not slower than the %s kernel the fix runs, so not a warning: " % kernel
    return head + "; ".join(parts) + " (%s, %s)" % (cost["timed"], how)
