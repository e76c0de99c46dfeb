"""Inputs for any transformers model, made from what the model says it takes: its forward
signature, its ``main_input_name`` and its config (image size and channels, patch and merge sizes,
the image token and how many of them one image becomes, mel bins, the encoder-decoder split).

Text models get token ids (never a special token's id); vision models one image in the layout
their forward takes (``[batch, channels, height, width]``, one more axis for models that take
several images or tiles, flattened patches with ``image_grid_thw`` for the Qwen-VL family);
multimodal models the image and as many image tokens as their vision tower makes of it (asked of
``get_image_features`` on the trace device, else read from the config); audio models a log-mel
spectrogram or a waveform of the length their encoder expects; encoder-decoder models decoder
token ids.

Each candidate is tried by one plain forward pass on the trace device (meta costs no memory and
no compute) before the trace, and the first that runs is traced; where the model's own message
says what it expected (a mel length, an image-token count) the candidate is corrected and tried
again. What was made is said in the report, and a model none of them runs is a failure with the
model's last message, never a guess traced as if it were right."""

from __future__ import annotations

import inspect
import os
import re

from ..errors import TraceError, _one_line
from ..state import own_run
from .hf_repair import _repair

# The image token of multimodal configs, by the names transformers uses.
_IMAGE_TOKEN_KEYS = ("image_token_id", "image_token_index", "image_token")
# How many tokens one image becomes, where the config says it.
_IMAGE_COUNT_KEYS = ("image_seq_length", "mm_tokens_per_image", "num_image_tokens", "image_token_count",
                     "num_query_tokens", "image_seq_len")
_TRIES = 6
_DEBUG = bool(os.environ.get("ATTN_DOCTOR_DEBUG_INPUTS"))


def _cfg(config, *names, default=None):
    for name in names:
        value = getattr(config, name, None)
        if value is not None:
            return value
    return default


def _signature(model):
    try:
        return inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return {}


def _special_ids(config):
    found = set()
    for cfg in (config, getattr(config, "text_config", None)):
        if cfg is None:
            continue
        for key, value in vars(cfg).items():
            if ("token" in key or key.endswith("_id") or key.endswith("_index")) and isinstance(value, int) \
                    and not isinstance(value, bool):
                found.add(value)
            elif "token" in key and isinstance(value, (list, tuple)):
                found.update(v for v in value if isinstance(v, int))
    return found


def _vocab(config):
    text = getattr(config, "text_config", None)
    for cfg in (config, text):
        v = getattr(cfg, "vocab_size", None) if cfg is not None else None
        if isinstance(v, int) and v > 1:
            return v
    return None


def text_token(config):
    """A token id no special token has (pad, bos, eos, the image token ...), below the vocabulary."""
    special = _special_ids(config)
    vocab = _vocab(config) or 32
    for tid in range(3, max(4, vocab)):
        if tid not in special:
            return tid
    return 0


def _size(value, default=224):
    if isinstance(value, int) and value > 0:
        return value, value
    if isinstance(value, (list, tuple)) and len(value) >= 2 and all(isinstance(v, int) for v in value[-2:]):
        return int(value[-2]), int(value[-1])
    if isinstance(value, dict):
        h, w = value.get("height"), value.get("width")
        if isinstance(h, int) and isinstance(w, int):
            return h, w
        edge = value.get("shortest_edge")
        if isinstance(edge, int):
            return edge, edge
    return default, default


def _vision_config(config):
    for key in ("vision_config", "vision_tower_config", "visual"):
        sub = getattr(config, key, None)
        if sub is not None and not isinstance(sub, (dict, str)):
            return sub
    if getattr(config, "image_size", None) is not None or getattr(config, "patch_size", None) is not None:
        return config
    return None


def _channels(vision):
    value = _cfg(vision, "num_channels", "in_channels", "in_chans", "num_input_channels", default=3)
    return value if isinstance(value, int) and value > 0 else 3


def _patch(vision):
    value = _cfg(vision, "patch_size", "patch_sizes", default=16)
    if isinstance(value, (list, tuple)):
        value = value[0]
    return value if isinstance(value, int) and value > 0 else 16


class Candidate(object):
    """One way to give the model an image (or none): its keyword arguments and how many tokens it
    becomes (None: not known yet)."""

    def __init__(self, name, kwargs, count=None):
        self.name, self.kwargs, self.count = name, kwargs, count


def _image_candidates(model, config, params, device, dtype):
    """The layouts one image can take for this model, most likely first."""
    import torch

    vision = _vision_config(config)
    if vision is None and getattr(model, "main_input_name", None) == "pixel_values":
        vision = config  # an image model whose config names no size: 224 pixels, 3 channels
    tower = "grid_thw" in params and "hidden_states" in params  # a Qwen-VL-style vision tower alone
    if tower and vision is None:
        vision = config
    if vision is None or ("pixel_values" not in params and not tower):
        return []
    c = _channels(vision)
    h, w = _size(_cfg(vision, "image_size", "img_size", "input_size", default=None), 224)
    patch = _patch(vision)
    out = []
    grid_key = "image_grid_thw" if "image_grid_thw" in params else ("grid_thw" if "grid_thw" in params else None)
    pixel_key = "pixel_values" if "pixel_values" in params else ("hidden_states" if grid_key == "grid_thw" else None)
    if grid_key and pixel_key:
        # the Qwen-VL family: the patches of one image flattened, its grid (t, h, w) in patches
        merge = _cfg(vision, "spatial_merge_size", "merge_size", default=2) or 2
        tps = _cfg(vision, "temporal_patch_size", default=1) or 1  # frames per patch (Qwen-VL: 2, says so)
        c_in = _cfg(vision, "in_channels", "in_chans", "num_channels", default=3) or 3
        side = 4 * merge
        pixels = torch.ones(side * side, c_in * tps * patch * patch, dtype=dtype, device=device)
        grid = torch.tensor([[1, side, side]], dtype=torch.long, device=device)
        out.append(Candidate("patches [%d, %d] with %s [1, %d, %d]" % (side * side, pixels.shape[1], grid_key, side, side),
                             {pixel_key: pixels, grid_key: grid}, side * side // (merge * merge)))
        if pixel_key != "pixel_values":
            return out  # a Qwen-VL-style vision tower alone: patches in, nothing else
    positions_key = next((k for k in ("spatial_shapes", "pixel_position_ids") if k in params), None)
    if positions_key and "pixel_values" in params:
        # an image as a sequence of flattened patches with where each sits (SigLIP 2's NaFlex, Gemma 4's
        # tower): [1, patches, channels x patch x patch], the grid as shapes or as (x, y) per patch
        side = max(1, min(h, w) // patch)
        count = _cfg(vision, "num_patches", default=None)
        if isinstance(count, int) and 0 < count < side * side:
            side = max(1, int(count ** 0.5))
        pool = _cfg(vision, "pooling_kernel_size", "spatial_merge_size", "merge_size", default=1)
        if isinstance(pool, int) and 1 < pool <= side:
            side -= side % pool  # pooled or merged pool x pool patches at a time
        n = side * side
        kwargs = {"pixel_values": torch.ones(1, n, c * patch * patch, dtype=dtype, device=device)}
        if positions_key == "spatial_shapes":
            kwargs["spatial_shapes"] = torch.tensor([[side, side]], dtype=torch.long, device=device)
        else:
            ys, xs = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")
            kwargs["pixel_position_ids"] = torch.stack([xs.flatten(), ys.flatten()], -1)[None].to(device)
        if "pixel_attention_mask" in params:
            kwargs["pixel_attention_mask"] = torch.ones(1, n, dtype=torch.bool, device=device)
        out.append(Candidate("patches [1, %d, %d] with %s for a %dx%d grid" % (n, c * patch * patch, positions_key,
                                                                              side, side), kwargs))
    # not zeros: some models drop all-zero images as padding (Idefics3)
    def image(shape, sizes):
        cand = {"pixel_values": torch.ones(*shape, dtype=dtype, device=device)}
        if sizes:
            cand["image_sizes"] = torch.tensor([[h, w]], dtype=torch.long, device=device)
        if "pixel_attention_mask" in params:
            cand["pixel_attention_mask"] = torch.ones(*shape[:-3], h, w, dtype=torch.bool, device=device)
        if "pixel_mask" in params:
            cand["pixel_mask"] = torch.ones(1, h, w, dtype=torch.long, device=device)
        return cand

    # image_sizes where the forward takes them, and first without (a llava whose tower has no patch size)
    sizes = (False, True) if "image_sizes" in params else (False,)
    for with_sizes in sizes:
        out.append(Candidate("pixel_values [1, %d, %d, %d]" % (c, h, w), image((1, c, h, w), with_sizes)))
    for with_sizes in sizes[::-1]:
        out.append(Candidate("pixel_values [1, 1, %d, %d, %d]" % (c, h, w), image((1, 1, c, h, w), with_sizes)))
    return out


def _video_candidates(config, params, device, dtype):
    import torch

    vision = _vision_config(config) or config
    c = _channels(vision)
    h, w = _size(_cfg(vision, "image_size", "img_size", default=None), 224)
    frames = _cfg(vision, "num_frames", "frames", default=None) or 2 * (_cfg(vision, "tubelet_size", default=1) or 1)
    return [Candidate("pixel_values_videos [1, %d, %d, %d, %d]" % (frames, c, h, w),
                      {"pixel_values_videos": torch.zeros(1, frames, c, h, w, dtype=dtype, device=device)})]


def _feature_count(model, cand):
    """How many tokens the model's vision tower makes of one image: asked of its
    ``get_image_features`` on the trace device; None where it cannot say."""
    import torch

    get = getattr(model, "get_image_features", None)
    if get is None:
        return None
    try:
        names = inspect.signature(get).parameters
    except (TypeError, ValueError):
        names = {}
    kwargs = {k: v for k, v in cand.kwargs.items() if k in names or "kwargs" in names}
    try:
        with torch.no_grad(), own_run():
            out = get(**kwargs)
    except Exception:  # noqa: BLE001 - a tower that needs more than the image: the config says
        return None
    return _count_tokens(out)


def _count_tokens(out):
    import torch

    if hasattr(out, "pooler_output") and getattr(out, "pooler_output", None) is not None:
        out = out.pooler_output
    elif hasattr(out, "last_hidden_state") and not isinstance(out, torch.Tensor):
        out = out.last_hidden_state
    if isinstance(out, torch.Tensor):
        return int(out.numel() // max(1, out.shape[-1])) if out.dim() >= 2 else None
    if isinstance(out, (list, tuple)) and out and all(isinstance(t, torch.Tensor) for t in out):
        return sum(int(t.numel() // max(1, t.shape[-1])) for t in out)
    return None


def _config_count(config, vision):
    for cfg in (config, vision):
        if cfg is None:
            continue
        v = _cfg(cfg, *_IMAGE_COUNT_KEYS)
        if isinstance(v, int) and v > 0:
            return v
    if vision is not None:
        h, w = _size(_cfg(vision, "image_size", default=None), 224)
        patch = _patch(vision)
        return (h // patch) * (w // patch)
    return None


_AUDIO_TOKEN_KEYS = ("audio_token_id", "audio_token_index", "audio_token")


def _special_token(config, keys):
    for cfg in (config, getattr(config, "text_config", None)):
        if cfg is None:
            continue
        for key in keys:
            v = getattr(cfg, key, None)
            if isinstance(v, int) and not isinstance(v, bool):
                return v
    return None


def _image_token(config):
    for cfg in (config, getattr(config, "text_config", None)):
        if cfg is None:
            continue
        for key in _IMAGE_TOKEN_KEYS:
            v = getattr(cfg, key, None)
            if isinstance(v, int) and not isinstance(v, bool):
                return v
    return None


def _audio_inputs(config, params, main, device, dtype):
    """A log-mel spectrogram or a waveform, as the model's forward and config say."""
    import torch

    audio = _cfg(config, "audio_config", "encoder_config", default=None) or config
    if main == "input_features" or ("input_features" in params and main not in ("input_values",)):
        mels = _cfg(audio, "num_mel_bins", "n_mels", "mel_bins", default=None)
        if isinstance(mels, int):
            frames = _cfg(audio, "max_source_positions", default=None)
            frames = 2 * frames if isinstance(frames, int) and frames <= 4096 else 128
            return {"input_features": torch.zeros(1, mels, frames, dtype=dtype, device=device)}, "mels"
        feat = _cfg(audio, "input_feat_per_channel", default=None)
        if isinstance(feat, int):
            feat *= _cfg(audio, "input_channels", default=1) or 1
        else:
            feat = _cfg(audio, "feature_size", "num_features", "hidden_size", default=80)
        return {"input_features": torch.zeros(1, 128, feat, dtype=dtype, device=device)}, "frames"
    if main == "input_values" or "input_values" in params:
        mels = _cfg(audio, "num_mel_bins", default=None)
        if isinstance(mels, int):  # a spectrogram given as input_values (AST): [batch, time, mel bins]
            frames = _cfg(audio, "max_length", default=None)
            frames = frames if isinstance(frames, int) and 0 < frames <= 4096 else 128
            return {"input_values": torch.zeros(1, frames, mels, dtype=dtype, device=device)}, "mels"
        channels = _cfg(config, "audio_channels", default=None)
        samples = 16000
        shape = (1, channels, samples) if isinstance(channels, int) and "codec" not in type(config).__name__.lower() \
            and _cfg(config, "codebook_size", default=None) is not None else (1, samples)
        return {"input_values": torch.zeros(*shape, dtype=dtype, device=device)}, "waveform"
    return None, None


def _ids(config, runs, seq_len, device):
    """Token ids: each special token's run (an image's or an audio clip's placeholders) first, then
    ``seq_len`` text tokens."""
    import torch

    tid = text_token(config)
    total = sum(runs.values())
    ids = torch.full((1, total + seq_len), tid, dtype=torch.long, device=device)
    at = 0
    for token, count in runs.items():
        ids[:, at:at + count] = token
        at += count
    return ids


def make_inputs(model, config, seq_len, device, dry_run=True):
    """(kwargs, description, notes) for ``model``; raises TraceError("build") where no candidate
    runs (with the model's message for the most likely one)."""
    import torch

    params = _signature(model)
    main = getattr(model, "main_input_name", "input_ids")
    if isinstance(main, (list, tuple)):
        main = main[0]
    dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)
    notes = []
    base = {}
    image_token = _image_token(config)
    takes_text = "input_ids" in params
    audio = None
    # a multimodal model built without its audio tower (audio_config None) takes no audio
    no_audio_tower = "audio_config" in vars(config) and vars(config)["audio_config"] is None
    if main in ("input_features", "input_values") or (
            ("input_features" in params or "input_values" in params) and not no_audio_tower):
        # an encoder-decoder that takes either (SpeechEncoderDecoderModel: `inputs`) feeds its encoder's
        audio_main = main
        encoder_main = getattr(getattr(model, "encoder", None), "main_input_name", None)
        if main not in ("input_features", "input_values") and encoder_main in ("input_features", "input_values") \
                and encoder_main in params:
            audio_main = encoder_main
        audio, _ = _audio_inputs(config, params, audio_main, device, dtype)
    known = ("input_ids", "pixel_values", "pixel_values_videos", "input_features", "input_values", "inputs_embeds")
    if main not in known and not (takes_text or audio):
        raise TraceError("build", "%s takes %s as its main input, which attn-doctor cannot make from a config (a "
                                  "time series, latents, states): give the model and its inputs with a factory "
                                  "(MODULE:FACTORY returning (model, inputs))" % (type(model).__name__, main))
    if audio:
        base.update(audio)
        _frame_masks(torch, base, tuple(audio), params, device)
    images = []
    if main == "pixel_values_videos" or ("pixel_values_videos" in params and "pixel_values" not in params):
        images = _video_candidates(config, params, device, dtype)
    elif "pixel_values" in params or ("grid_thw" in params and "hidden_states" in params):
        images = _image_candidates(model, config, params, device, dtype)
    optional_image = main not in ("pixel_values", "pixel_values_videos")
    enc_dec = bool(getattr(config, "is_encoder_decoder", False))
    if enc_dec and "decoder_input_ids" in params:
        start = _cfg(config, "decoder_start_token_id", default=None)
        dec = torch.full((1, max(1, seq_len // 2)), text_token(config), dtype=torch.long, device=device)
        if isinstance(start, int) and 0 <= start < (_vocab(config) or start + 1):
            dec[:, 0] = start
        base["decoder_input_ids"] = dec
    # with an image first (its tower runs too), then without one where the image is optional; text
    # where the model takes it (an image model's text only where it needs some: BLIP's decoder)
    audio_token = _special_token(config, _AUDIO_TOKEN_KEYS) if audio else None
    required = {n for n, p in params.items() if p.default is inspect.Parameter.empty
                and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    variants = []
    for cand in list(images) + ([None] if (optional_image or not images) else []):
        if not takes_text:
            variants.append((cand, False))
        elif cand is not None and main in ("pixel_values", "pixel_values_videos") and "input_ids" not in required:
            variants.extend([(cand, False), (cand, True)])
        else:
            variants.append((cand, True))
    first_exc, state, last = None, {}, None
    for n_variant, (cand, with_text) in enumerate(variants):
        state = {"image": cand, "count": None, "audio": tuple(audio or ()), "audio_count": 0, "config": config,
                 "seq_len": seq_len, "device": device, "dtype": dtype, "text_token": text_token(config),
                 "params": params, "doc": getattr(type(model).forward, "__doc__", None), "model": model}
        if cand is not None and with_text and image_token is not None:
            state["count"] = cand.count or _feature_count(model, cand) or _config_count(config, _vision_config(config))
        for _ in range(_TRIES):
            kwargs = dict(base)
            if cand is not None:
                kwargs.update(cand.kwargs)
            if with_text:
                runs = {}
                if cand is not None and image_token is not None and state["count"]:
                    runs[image_token] = state["count"]
                if audio_token is not None and state["audio_count"]:
                    runs[audio_token] = state["audio_count"]
                kwargs["input_ids"] = _ids(config, runs, seq_len, device)
            error = _dry_run(model, kwargs, device) if dry_run else None
            if error is None:
                if cand is None and images:
                    notes.append("no image input attn-doctor made runs this model (%s): traced without one, so the "
                                 "vision tower was not run" % _one_line(first_exc) if first_exc is not None else
                                 "traced without an image: the vision tower was not run")
                return kwargs, _describe(kwargs, state, image_token), notes
            if _DEBUG:
                import traceback

                print("attn-doctor inputs: %s -> %s" % (_describe(kwargs, state, image_token), _one_line(error)),
                      "".join(traceback.format_exception(type(error), error, error.__traceback__)[-3:]))
            if first_exc is None:
                first_exc = error
            if last is None or last[0] == n_variant or len(kwargs) > last[1]:
                # what the most complete candidate (the most inputs) ended on, after every repair its
                # messages allowed
                last = (n_variant, len(kwargs), _describe(kwargs, state, image_token), error)
            fixed = _repair(kwargs, error, state)
            if fixed is None:
                break
            if fixed != "recount":
                # a repaired input, and one the model said it misses, stay for the next try
                base.update({k: v for k, v in fixed.items() if k in base or k not in kwargs})
                if audio:
                    _frame_masks(torch, base, tuple(audio), params, device)
                if cand is not None and state["count"] is None and with_text and image_token is not None:
                    state["count"] = _feature_count(model, cand) or _config_count(config, _vision_config(config))
    tried, error = last[2:] if last is not None else ("", first_exc)
    raise TraceError("build", "no inputs attn-doctor made from the config run %s's forward pass: the last tried "
                              "(%s) raised %s%s; give the model and its inputs with a factory (MODULE:FACTORY "
                              "returning (model, inputs))" % (type(model).__name__, tried, _one_line(error),
                                                              _raised_at(error)), error)


def _frame_masks(torch, inputs, audio_keys, params, device):
    """The masks of which audio frames are real (all of them), as long as the features made: the
    frames are the last axis of [batch, mel, time] spectrograms, else the second."""
    feats = next((inputs[k] for k in audio_keys if inputs.get(k) is not None), None)
    if feats is None:
        return
    for mask in ("input_features_mask", "feature_attention_mask"):
        if mask in params:
            frames = feats.shape[-1] if (feats.dim() == 3 and inputs.get("input_features") is feats
                                         and feats.shape[1] < feats.shape[2]) else feats.shape[1]
            inputs[mask] = torch.ones(feats.shape[0], frames, dtype=torch.long, device=device)


def _dry_run(model, kwargs, device):
    """None where one plain forward pass runs (or stops only at what the trace device cannot do:
    data-dependent Python on meta); else the exception."""
    import contextlib

    import torch

    from ..dtype_path.limits import _meta_limitation
    from .factory import cuda_to
    from .gpu_stand_in import autocast_on_trace_device, transformers_sees_flash_attn

    off_gpu = device != "cuda"
    training = model.training
    model.eval()  # as a model is run to be traced (some refuse a training forward without labels)
    try:
        # as the trace will run it: the trace device standing for the GPU, flash-attn as it imports here
        with torch.no_grad(), torch.device(device), (cuda_to(device) if off_gpu else contextlib.nullcontext()), (
                autocast_on_trace_device(device) if off_gpu else contextlib.nullcontext()), (
                transformers_sees_flash_attn() if off_gpu else contextlib.nullcontext()), own_run():
            model(**kwargs)
    except Exception as exc:  # noqa: BLE001 - the model's own message decides
        if device == "meta" and _meta_limitation(exc):
            return None
        return exc if input_problem(exc) else None
    finally:
        model.train(training)
    return None


# What a forward pass says when its inputs do not fit it (a shape, a missing input, an index past
# a table), as opposed to what the trace is there to judge (dtypes, a kernel's refusal).
_SHAPE_WORDS = re.compile(r"size|shape|dimension|reduction dim|unpack|match|out of range|expected \d|D input|split_with_sizes|"
                          r"not found|must be|Number of|cannot reshape|invalid for input|specify|provide|None|is missing|required|[Pp]lease pass|"
                          r"should contain \d+ elements|multiple of|specified|\blength\b|\bdescribes\b",
                          re.I)
_DTYPE_WORDS = re.compile(r"dtype|scalar type|Half|BFloat16|Float\b|fp16|bf16|float16|bfloat16|same type", re.I)


# Where transformers hands q/k/v to a kernel: an exception raised there is about the attention
# call (a kernel wrapper's own bug, a refusal), whatever the inputs were.
_ATTENTION_FILES = re.compile(r"[\\/]transformers[\\/](?:integrations[\\/][^\\/]*attention[^\\/]*\.py|"
                              r"modeling_flash_attention_utils\.py)$")


def _raised_in_attention(exc):
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    return bool(last and _ATTENTION_FILES.search(last))


def input_problem(exc):
    """True where ``exc`` says the inputs do not fit the model; False where it is a dtype or kernel
    problem (the trace judges those on the model, whatever the inputs)."""
    if type(exc).__module__.startswith("attn_doctor"):
        return False  # a stand-in's refusal: the kernel's rules, judged by the trace
    if _raised_in_attention(exc):
        return False  # the attention path itself (transformers' kernel wrappers): the trace's to judge
    text = str(exc)
    if isinstance(exc, AttributeError) and text.startswith("'NoneType' object has no attribute"):
        return True  # an input the model reads was not given ("... no attribute 'dtype'" included)
    if _DTYPE_WORDS.search(text):
        return False
    if isinstance(exc, (IndexError, KeyError, AttributeError, TypeError, NotImplementedError)):
        return True
    return bool(_SHAPE_WORDS.search(text))


def _raised_at(exc):
    """" at FILE:LINE" of the model's own line that raised (the innermost frame outside torch and
    attn-doctor), "" where there is none."""
    import os
    import traceback

    from ..dtype_path.frames import transparent_dirs
    from ..places import DOCTOR_DIR

    # the frames the tracer skips when it names an op's caller: torch's, einops', the doctor's
    skip = transparent_dirs() + (DOCTOR_DIR,)
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith(skip)]
    if not frames:
        return ""
    path = frames[-1].filename
    cut = path.rfind("site-packages" + os.sep)
    return " at %s:%d" % (path[cut + len("site-packages" + os.sep):] if cut >= 0 else path, frames[-1].lineno)


def _describe(kwargs, state, image_token):
    import torch

    parts = []
    for name, t in kwargs.items():
        if isinstance(t, torch.Tensor):
            dtype = "" if t.dtype in (torch.long, torch.int64, torch.bool) else str(t.dtype).replace("torch.", "")
            parts.append("%s %s%s" % (name, dtype, list(t.shape)))
    text = ", ".join(parts)
    if state.get("count") and image_token is not None and state.get("image") is not None:
        text += " (%d image tokens, id %d)" % (state["count"], image_token)
    return text
