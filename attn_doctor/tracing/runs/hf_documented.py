"""An input a transformers model says it needs, made from the shape its forward's docstring documents
(``bbox (`torch.LongTensor` of shape `(batch_size, sequence_length, 4)`)``), each axis resolved from
the inputs already made, the config, or a literal. Only where every axis resolves: a shape guessed
past the documentation would be a second guess dressed as a first."""

from __future__ import annotations

import re

_BATCH = {"batch_size", "num_images", "num_images_or_videos", "num_videos", "num_audios", "num_clips"}
_LENGTH = {"sequence_length", "seq_len", "seq_length", "num_boxes", "target_sequence_length", "text_length",
           "encoder_sequence_length"}
_FLOAT_DOC = re.compile(r"Float|Half|BFloat")
_INTEGER_NAME = re.compile(r"(?:^|_)(?:ids|mask|masks|bbox|boxes|shapes|sizes|positions|inputs)$")
# "need(s) ... X", "You have to specify X", "X is required", "`X` cannot be `None`": a forward's own words
# for an input it lacks (the name is kept only where it is one of the forward's parameters)
_NEEDS = re.compile(r"(?:have to specify|must (?:be )?(?:provide|pass|specif)\w*|requires?)\s+`?(\w+)`?|"
                    r"`?(\w+)`? (?:is|are) (?:required|missing)|[Pp]lease (?:pass|provide) `(\w+)`|`?(\w+)`? must be (?:given|provided|passed|specified)|`(\w+)` cannot be `?None`?", re.I)


# "Both X and Y should be specified at the same time": each of the two
_BOTH = re.compile(r"[Bb]oth `?(\w+)`? and `?(\w+)`? (?:should|must|need to|have to) be")


def named_in_message(text, params):
    """The parameters of the forward a message says are missing (case as the forward spells them)."""
    lower = {p.lower(): p for p in params}
    found = []
    names = [next(g for g in m.groups() if g) for m in _NEEDS.finditer(text)]
    names += [g for m in _BOTH.finditer(text) for g in m.groups()]
    for name in names:
        if name.lower() in lower and lower[name.lower()] not in found:
            found.append(lower[name.lower()])
    return found


def documented_shape(doc, name):
    """(axes, type) of ``name`` in a forward's docstring: (["batch_size", "sequence_length", "4"],
    "torch.LongTensor"); None where it documents no shape."""
    if not doc:
        return None
    m = re.search(r"^\s*%s \(`+'?([\w.]+)'?`+\s*of shape\s*[`']*\(([^)]*)\)" % re.escape(name), doc, re.M)
    if m is None:
        return None
    axes = [a.strip().strip("`'") for a in m.group(2).split(",") if a.strip()]
    return (axes, m.group(1)) if axes else None


def _config_int(config, key):
    key = key[len("config."):] if key.startswith("config.") else key
    for cfg in (config,) + tuple(getattr(config, k, None) for k in ("text_config", "vision_config", "audio_config")):
        value = getattr(cfg, key, None) if cfg is not None else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def axis_value(axis, inputs, config, seq_len):
    if axis.isdigit():
        return int(axis)
    if axis in _BATCH:
        return 1
    ids = inputs.get("input_ids")
    if axis in _LENGTH:
        return int(ids.shape[-1]) if ids is not None else seq_len
    pixels = inputs.get("pixel_values")
    if pixels is not None and pixels.dim() == 4 and axis in ("num_channels", "height", "width", "image_size"):
        return int(pixels.shape[{"num_channels": 1, "height": 2, "width": 3, "image_size": 2}[axis]])
    value = _config_int(config, axis)
    if value is None and axis in ("height", "width", "image_size"):
        # an image's side: the config's, else the 224 of transformers' image processors
        value = _config_int(config, "image_size") or 224
    if value is None and axis == "num_channels":
        value = 3  # RGB, as the image processors give it
    if value is None and axis in ("mel_bins", "feature_size"):
        value = _config_int(config, "num_mel_bins") or _config_int(config, "feature_size")
    if value is None and axis in ("time_steps", "num_frames"):
        value = 128
    if value is None and axis.startswith("num_"):
        value = 4  # a count of things (visual features, boxes) no config fixes: any few
    return value


def make_documented(torch, name, doc, inputs, config, seq_len, dtype, device):
    """A tensor for ``name`` in its documented shape, or None where the docstring does not say one
    that the inputs and config resolve. Integers (ids, masks, boxes) as zeros or ones, floats as ones."""
    shape = documented_shape(doc, name)
    if shape is None:
        return None
    axes, kind = shape
    dims = [axis_value(a, inputs, config, seq_len) for a in axes]
    if any(d is None or d <= 0 or d > 4096 for d in dims):
        return None
    if "Long" in kind or "Int" in kind or "Bool" in kind or (not _FLOAT_DOC.search(kind) and _INTEGER_NAME.search(name)):
        # a mask keeps every position, a grid counts one patch per axis (a zero grid holds no image)
        fill = 1 if name.endswith(("mask", "masks")) or "grid" in name else 0
        if name.endswith("sizes"):
            # per-item sizes (merge_sizes): the config's one size (merge_size) where it has it, else 1
            fill = _config_int(config, name[:-1]) or _config_int(config, "spatial_" + name[:-1]) or 1
        return torch.full(dims, fill, dtype=torch.long, device=device)
    return torch.ones(*dims, dtype=dtype or torch.float32, device=device)
