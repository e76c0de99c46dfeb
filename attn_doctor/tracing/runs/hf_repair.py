"""Inputs for a transformers model corrected from what its forward pass said when they did not fit
(hf_inputs.make_inputs tries them): a feature count, a layout, an image size, a video's frames, the
arguments it says it misses. Each repair reads the model's own message, never a list of models."""

from __future__ import annotations

import re

from .hf_documented import axis_value, make_documented, named_in_message

_MEL_LENGTH = re.compile(r"input features to be of length (\d+), but found (\d+)")
_NORM_SHAPE = re.compile(r"normalized_shape=\[(\d+)\], expected input with shape \[\d+\], but got input of size")
_ONE_AXIS_SHORT = re.compile(r"Dimension out of range \(expected to be in range of \[-(\d), \d\], but got \1\)|"
                             r"[Ee]xpected (?:3D|4D) .*input.* \(got (?:2D|3D) input")
# (CPU and GPU: "mat1 and mat2 shapes cannot be multiplied (80x128 and 320x1024)"; meta: "a and b must
# have same reduction dim, but got [80, 128] X [320, 1024]")
_MATMUL = re.compile(r"shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x\d+\)|"
                     r"same reduction dim, but got \[(\d+), (\d+)\] X \[(\d+), \d+\]")
_RUNNING_MEAN = re.compile(r"running_mean should contain (\d+) elements not (\d+)")
_UNPACK = re.compile(r"not enough values to unpack \(expected (\d), got (\d)\)")
_SPLIT = re.compile(r"split_with_sizes expects split_sizes to sum exactly to (\d+).*got split_sizes=\[(\d+)\]")
_IMAGE_SIZE = re.compile(r"Input (?:image size \((\d+)\*(\d+)\)|height \((\d+)\)) doesn't match model \((\d+)(?:\*(\d+))?\)")
_CONV1D_RANK = re.compile(r"Expected 2D \(unbatched\) or 3D \(batched\) input to conv1d, but got input of size: \[\d+(?:, \d+){3}\]")
_NOT_MONO = re.compile(r"Audio must be mono, but got (\d+)")
_BROADCAST = re.compile(r"Attempting to broadcast a dimension of length (\d+)")
# meta: "Invalid channel dimensions"; CPU/GPU: "expected input[1, 3, 224, 224] to have 4 channels, but got 3"
_CHANNELS = re.compile(r"Invalid channel dimensions|to have \d+ channels, but got \d+ channels")
_MISSING_ARGS = re.compile(r"forward\(\) missing \d+ required positional arguments?: (.+)$", re.MULTILINE)
# "... had torch.Size([448, 448]); but expected shape should be broadcastable to [1, 3, 224, 224]": a
# table of the image's size (a visual prompt) against the image made
_BROADCAST_TO = re.compile(r"had torch\.Size\(\[([\d, ]+)\]\); but expected shape should be broadcastable to \[([\d, ]+)\]")
# "Input must be a 5D tensor of shape (batch_size, 2, num_channels, height, width)": the layout, axis by axis
_SHAPE_SAID = re.compile(r"(\d)D tensor of shape \(([^)]*)\)")
# "`input_values` length 16000 is not a multiple of 1920"; "to be a multiple of `n_window * 2` (100), but got 128"
_MULTIPLE = re.compile(r"(\d+) is not a multiple of (\d+)|multiple of [^,]*?\(?(\d+)\)?,? but got (\d+)")
_TOKENS = re.compile(r"(Image|Audio|Video) features and \w+ tokens do not match[^\d]*tokens: (\d+), features:? (\d+)",
                     re.I)


def _repair(inputs, exc, state):
    """Inputs corrected from the model's own message, or None where it says nothing usable."""
    import torch

    text = str(exc)
    got, want = _matmul_widths(text)
    m = _MEL_LENGTH.search(text)
    if m and "input_features" in inputs:
        feats = inputs["input_features"]
        fixed = dict(inputs)
        fixed["input_features"] = torch.zeros(*feats.shape[:-1], int(m.group(1)), dtype=feats.dtype,
                                              device=feats.device)
        return fixed
    feats_key = next((k for k in ("input_features", "input_values") if k in inputs and k in state.get("audio", ())), None)
    if feats_key is not None:
        feats = inputs[feats_key]
        m = _NORM_SHAPE.search(text)
        if m and feats.shape[-1] != int(m.group(1)):
            # a norm over the features' last axis says how many features a frame has
            return _replace(inputs, feats_key, torch.zeros(*feats.shape[:-1], int(m.group(1)), dtype=feats.dtype,
                                                           device=feats.device))
        if got is not None and feats.dim() >= 2 and got == feats.shape[-1] and want != got and not state.get("features_set"):
            # the first projection says how many features a frame has: [.., in_features] of its weight
            state["features_set"] = True
            return _replace(inputs, feats_key, torch.zeros(*feats.shape[:-1], want, dtype=feats.dtype,
                                                           device=feats.device))
        if got is not None and feats.dim() == 3 and got != feats.shape[-1] and want != got and not state.get("transposed") \
                and (got > want) == (feats.shape[-1] > feats.shape[-2]):
            # a convolutional front end flattened channels x a subsampled axis that is time where mel bins
            # were meant (or the reverse): the projection wants it smaller/larger as the other axis is
            state["transposed"] = True
            return _replace(inputs, feats_key, feats.transpose(-1, -2).contiguous())
        m = _RUNNING_MEAN.search(text)
        if m and feats.dim() >= 3 and {feats.shape[-2], feats.shape[-1]} == {int(m.group(1)), int(m.group(2))} \
                and not state.get("norm_transposed"):
            # a norm over the mel bins counted time: the two axes the other way round
            state["norm_transposed"] = True
            return _replace(inputs, feats_key, feats.transpose(-1, -2).contiguous())
        m = _UNPACK.search(text)
        if m and int(m.group(2)) == feats.dim() and int(m.group(1)) == feats.dim() + 1 and not state.get("unsqueezed"):
            state["unsqueezed"] = True  # [batch, channels, samples]: one channel
            return _replace(inputs, feats_key, feats.unsqueeze(1))
        if feats_key == "input_values" and feats.dim() == 3 and _CONV1D_RANK.search(text) and not state.get("waveform"):
            # a spectrogram-shaped guess where the model's first layer is a conv over a waveform [batch, samples]
            state["waveform"] = True
            return _replace(inputs, feats_key, torch.zeros(feats.shape[0], 16000, dtype=feats.dtype, device=feats.device))
        m = _NOT_MONO.search(text) or _BROADCAST.search(text)
        if m and feats.dim() == 2 and feats.shape[-1] == int(m.group(1)) and not state.get("unsqueezed"):
            state["unsqueezed"] = True  # [batch, 1, samples]: the channel axis the codec counts
            return _replace(inputs, feats_key, feats.unsqueeze(1))
        if _ONE_AXIS_SHORT.search(text) and feats.dim() <= 3 and not state.get("unsqueezed"):
            state["unsqueezed"] = True  # [batch, channel, time, mel]: one channel
            return _replace(inputs, feats_key, feats.unsqueeze(1))
    pixels = inputs.get("pixel_values")
    if got is not None and pixels is not None and pixels.dim() == 2 and not state.get("patch_width"):
        # flattened patches [patches, channels x frames x patch x patch]: the embedding's width says
        # how many values a patch holds (a temporal patch of 2 frames or of 1)
        if got == pixels.shape[-1] and want != got:
            state["patch_width"] = True
            return _new_pixels(torch, inputs, state, (pixels.shape[0], want), pixels)
    if _CHANNELS.search(text) and not state.get("channels_set"):
        state["channels_set"] = True
        fixed = _first_conv_channels(torch, inputs, state)
        if fixed is not None:
            return fixed
    m = _IMAGE_SIZE.search(text)
    if m and pixels is not None and pixels.dim() >= 4 and not state.get("resized"):
        # the model names the image size it was built for: "(224*224) doesn't match model (256*192)"
        height = int(m.group(4))
        width = int(m.group(5)) if m.group(5) else height
        state["resized"] = True
        return _new_pixels(torch, inputs, state, pixels.shape[:-2] + (height, width), pixels)
    if m is None and _UNPACK.search(text) and pixels is not None and pixels.dim() == 4 and not state.get("video"):
        wanted = _UNPACK.search(text)
        if int(wanted.group(1)) == 5 and int(wanted.group(2)) == 4:
            # a video model: (batch, frames, channels, height, width), as many frames as the config has
            frames = getattr(state.get("config"), "num_frames", None) or 8
            state["video"] = True
            return _new_pixels(torch, inputs, state, (pixels.shape[0], int(frames)) + tuple(pixels.shape[1:]), pixels)
    m = _BROADCAST_TO.search(text)
    if m and pixels is not None and pixels.dim() >= 4 and not state.get("resized"):
        had = [int(x) for x in m.group(1).split(",")]
        if [int(x) for x in m.group(2).split(",")] == list(pixels.shape) and len(had) >= 2 \
                and tuple(had[-2:]) != tuple(pixels.shape[-2:]) and max(had[-2:]) <= 4096:
            # an image-sized table the image is added to: the image takes its size
            state["resized"] = True
            return _new_pixels(torch, inputs, state, tuple(pixels.shape[:-2]) + tuple(had[-2:]), pixels)
    m = _SHAPE_SAID.search(text)
    if m and pixels is not None and pixels.dim() == 4 and int(m.group(1)) != 4 and not state.get("shape_said"):
        # the model states the layout it takes: each axis from the image made, the config or a literal
        state["shape_said"] = True
        dims = [axis_value(a.strip().strip("`'"), inputs, state.get("config"), state.get("seq_len") or 16)
                for a in m.group(2).split(",")]
        if len(dims) == int(m.group(1)) and all(isinstance(d, int) and 0 < d <= 4096 for d in dims):
            return _new_pixels(torch, inputs, state, tuple(dims), pixels)
    m = _MULTIPLE.search(text)
    if m and not state.get("multiple_set"):
        length, multiple = (int(m.group(1)), int(m.group(2))) if m.group(1) else (int(m.group(4)), int(m.group(3)))
        fixed = _to_multiple(torch, inputs, state, length, multiple)
        if fixed is not None:
            state["multiple_set"] = True
            return fixed
    m = _MISSING_ARGS.search(text)
    if m and not state.get("missing_done"):
        made = _missing_arguments(torch, inputs, re.findall(r"'(\w+)'", m.group(1)), state)
        if made:
            state["missing_done"] = True
            return made
    made_here = [n for n in state.get("named", ()) if n in inputs and inputs[n].is_floating_point()
                 and inputs[n].dim() >= 2]
    if got is not None and made_here and not state.get("named_width"):
        # a float input made from the docstring whose width a projection says: [.., in_features] of its weight
        hit = [n for n in made_here if inputs[n].shape[-1] == got]
        if len(hit) == 1 and want != got:
            state["named_width"] = True
            t = inputs[hit[0]]
            return _replace(inputs, hit[0], torch.ones(*t.shape[:-1], want, dtype=t.dtype, device=t.device))
    named = state.setdefault("named", set())
    wanted = [n for n in named_in_message(text, state.get("params") or ()) + _read_as_none(exc, state.get("params") or ())
              if n not in inputs and n not in named]
    if wanted:
        # the forward names an input it lacks: made in the shape its docstring documents, once each
        named.update(wanted)
        made = _missing_arguments(torch, inputs, wanted, state)
        if made:
            return made
    fixed = _grid_to_patches(torch, inputs, text, state)
    if fixed is not None:
        return fixed
    m = _SPLIT.search(text)
    if m and pixels is not None and pixels.dim() == 5 and int(m.group(2)) != pixels.shape[1]:
        # the model cuts one image into as many tiles as its grid says (llava-next): that many
        return _new_pixels(torch, inputs, state, (pixels.shape[0], int(m.group(2))) + tuple(pixels.shape[2:]), pixels)
    m = _TOKENS.search(text)
    if m:
        kind, wanted = m.group(1).lower(), int(m.group(3))
        if kind == "audio" and state.get("audio") and wanted != state.get("audio_count"):
            state["audio_count"] = wanted
            return "recount"
        if kind in ("image", "video") and state.get("image") is not None and wanted != state.get("count"):
            state["count"] = wanted
            return "recount"
    return None


def _grid_to_patches(torch, inputs, text, state):
    """One image's patch grid (image_grid_hw, image_grid_thw, target_sizes: one integer row of 2 or 3
    axes) that describes another count of patches than the tower made: a grid of that many, square
    where the count is."""
    import math

    m = _SPLIT.search(text)
    if not m or state.get("grid_set"):
        return None
    grids = [k for k, v in inputs.items() if getattr(v, "dim", lambda: 0)() == 2 and v.shape[0] == 1
             and v.shape[1] in (2, 3) and not v.is_floating_point() and int(v.prod()) == int(m.group(2))
             and k not in ("input_ids", "attention_mask")]
    if len(grids) != 1:
        return None
    patches, grid = int(m.group(1)), inputs[grids[0]]
    side = math.isqrt(patches)
    rows = side if side * side == patches else 1
    state["grid_set"] = True
    value = [rows, patches // rows] if grid.shape[1] == 2 else [1, rows, patches // rows]
    return _replace(inputs, grids[0], torch.tensor([value], dtype=grid.dtype, device=grid.device))


def _read_as_none(exc, params):
    """The forward's parameters that the line raising "'NoneType' object has no attribute 'X'" reads
    X of (``pixel_values.dtype``): inputs it needs that were not given."""
    import traceback

    m = re.match(r"'NoneType' object has no attribute '(\w+)'", str(exc))
    frames = traceback.extract_tb(exc.__traceback__) if m and isinstance(exc, AttributeError) else []
    line = (frames[-1].line or "") if frames else ""
    return [n for n in re.findall(r"\b(\w+)\.%s\b" % re.escape(m.group(1)), line) if n in params] if m else []


def _matmul_widths(text):
    """(the width a projection got, the width its weight takes) where the message is a matmul's
    shape refusal; (None, None) otherwise."""
    m = _MATMUL.search(text)
    if m is None:
        return None, None
    return int(m.group(2) or m.group(5)), int(m.group(3) or m.group(6))


def _first_conv_channels(torch, inputs, state):
    """The image (or the features) with as many channels as the model's first convolution takes: the
    first Conv2d for pixels, the first Conv1d for [batch, channels, time] features."""
    model = state.get("model")
    if model is None:
        return None
    for key, conv_type, rank in (("pixel_values", torch.nn.Conv2d, 4), ("input_features", torch.nn.Conv1d, 3),
                                 ("input_values", torch.nn.Conv1d, 3)):
        t = inputs.get(key)
        if t is None or t.dim() != rank:
            continue
        conv = next((m for m in model.modules() if isinstance(m, conv_type)), None)
        if conv is None or conv.in_channels == t.shape[1]:
            continue
        if rank == 3 and t.shape[-1] == conv.in_channels:
            return _replace(inputs, key, t.transpose(-1, -2).contiguous())  # [batch, time, channels] given
        shape = (t.shape[0], conv.in_channels) + tuple(t.shape[2:])
        if key == "pixel_values":
            return _new_pixels(torch, inputs, state, shape, t)
        return _replace(inputs, key, torch.zeros(*shape, dtype=t.dtype, device=t.device))
    return None


def _to_multiple(torch, inputs, state, got, multiple):
    """The made audio or image input whose last axis of length ``got`` the model wants a multiple of
    ``multiple``: that axis rounded up to the next multiple (as the feature extractor pads it)."""
    if multiple <= 1 or got % multiple == 0:
        return None
    keys = [k for k in state.get("audio", ())] + ["pixel_values"]
    for key in keys:
        t = inputs.get(key)
        if t is None or not t.is_floating_point():
            continue
        axes = [i for i in range(t.dim()) if t.shape[i] == got]
        if not axes:
            continue
        shape = list(t.shape)
        shape[axes[-1]] = -(-got // multiple) * multiple
        if shape[axes[-1]] > 1 << 20:
            return None
        if key == "pixel_values":
            return _new_pixels(torch, inputs, state, tuple(shape), t)
        return _replace(inputs, key, torch.zeros(*shape, dtype=t.dtype, device=t.device))
    return None


def _new_pixels(torch, inputs, state, shape, like):
    fixed = _replace(inputs, "pixel_values", torch.ones(*shape, dtype=like.dtype, device=like.device))
    if state.get("image") is not None:
        state["image"].kwargs["pixel_values"] = fixed["pixel_values"]
        state["count"] = None
    return fixed


def _missing_arguments(torch, inputs, names, state):
    """Inputs a forward pass says it misses, made from their names where the name says what they are
    (a second text's ids and mask, hidden states): None where one of them is not such a name."""
    config = state.get("config")
    ids = inputs.get("input_ids")
    fixed = dict(inputs)
    for name in names:
        if name.endswith("input_ids"):
            fixed[name] = ids if ids is not None else torch.full((1, state.get("seq_len") or 16), state["text_token"],
                                                                 dtype=torch.long, device=state.get("device"))
        elif name.endswith("attention_mask"):
            base = fixed.get(name.replace("attention_mask", "input_ids"), ids)
            if base is None:
                return None
            fixed[name] = torch.ones(base.shape, dtype=torch.long, device=base.device)
        elif name in ("hidden_states", "query_embeds", "inputs_embeds"):
            hidden = next((v for v in (getattr(config, n, None) for n in ("hidden_size", "d_model", "embed_dim"))
                           if v is not None), None)
            if not isinstance(hidden, int):
                return None
            length = ids.shape[-1] if ids is not None else (state.get("seq_len") or 16)
            fixed[name] = torch.zeros(1, length, hidden, dtype=state.get("dtype") or torch.float32,
                                      device=state.get("device"))
        else:
            value = make_documented(torch, name, state.get("doc"), fixed, config, state.get("seq_len") or 16,
                                    state.get("dtype"), state.get("device"))
            if value is None:
                return None
            fixed[name] = value
    return fixed


def _replace(inputs, key, value):
    fixed = dict(inputs)
    fixed[key] = value
    return fixed
