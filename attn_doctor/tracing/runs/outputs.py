"""What a forward pass took and returned, walked: the tensors in nested inputs and outputs (tuples,
lists, dicts, transformers' ModelOutput), mapped or listed, and the output's signature that a traced
and a plain run of one model must share."""

from __future__ import annotations


def output_signature(out, limit=64):
    """What a forward pass returned, as {"tensors": [[path, dtype, shape], ...]}: the same for a traced
    and a plain run of one model on one device, or the trace changed what the model computes."""
    import torch

    found = []

    def walk(obj, path, depth):
        if len(found) >= limit or depth > 6:
            return
        if isinstance(obj, torch.Tensor):
            found.append([path or "output", str(obj.dtype).replace("torch.", ""), [int(x) for x in obj.shape]])
        elif isinstance(obj, dict) or hasattr(obj, "to_tuple"):
            items = obj.items() if isinstance(obj, dict) else ((k, getattr(obj, k, None)) for k in obj.keys())
            for k, v in items:
                walk(v, "%s.%s" % (path, k) if path else str(k), depth + 1)
        elif isinstance(obj, (list, tuple)):
            for i, v in enumerate(obj[:16]):
                walk(v, "%s[%d]" % (path, i), depth + 1)

    walk(out, "", 0)
    return {"tensors": found}


def _map_tensors(obj, fn):
    import torch

    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, tuple):
        return tuple(_map_tensors(o, fn) for o in obj)
    if isinstance(obj, list):
        return [_map_tensors(o, fn) for o in obj]
    if isinstance(obj, dict):
        return {k: _map_tensors(v, fn) for k, v in obj.items()}
    return obj


def _tensors(obj):
    import torch

    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for o in obj:
            for t in _tensors(o):
                yield t
    elif isinstance(obj, dict):
        for o in obj.values():
            for t in _tensors(o):
                yield t
    elif hasattr(obj, "to_tuple"):  # transformers ModelOutput
        for t in _tensors(obj.to_tuple()):
            yield t
