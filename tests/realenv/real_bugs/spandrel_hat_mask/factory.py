"""spandrel HAT in bf16: every forward builds the shifted-window mask in calculate_mask and hands it
to the shifted blocks' window attention."""
import sys
import types

import torch


def _torchvision_or_stub():
    # PyPI's torchvision is a CUDA build: with the CPU torch its ops do not load and `import
    # torchvision` raises. spandrel imports it at package import (LaMa, RestoreFormer) but DAT
    # never uses it, so a stub with the two names spandrel imports is enough.
    try:
        import torchvision  # noqa: F401
        return
    except Exception:
        for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")]:
            del sys.modules[name]
    tv = types.ModuleType("torchvision")
    tr = types.ModuleType("torchvision.transforms")
    fn = types.ModuleType("torchvision.transforms.functional")

    class InterpolationMode:  # only referenced, never used by HAT
        NEAREST = "nearest"
        BILINEAR = "bilinear"
        BICUBIC = "bicubic"

    def _unused(*a, **k):
        raise RuntimeError("torchvision stub")

    fn.InterpolationMode = InterpolationMode
    fn.rotate = _unused
    fn.normalize = _unused
    tv.transforms = tr
    tr.functional = fn
    sys.modules.update({"torchvision": tv, "torchvision.transforms": tr,
                        "torchvision.transforms.functional": fn})


def build():
    _torchvision_or_stub()
    from spandrel.architectures.HAT import HAT

    torch.manual_seed(0)
    # one residual group of 2 blocks: block 1 is shifted (shift_size = window_size // 2)
    with torch.device("cpu"):  # HAT's __init__ calls .item() (drop-path rates): not on meta
        model = HAT(img_size=16, in_chans=3, embed_dim=16, depths=(2,), num_heads=(2,), window_size=4,
                    compress_ratio=2, squeeze_factor=4, mlp_ratio=2.0, upscale=2, drop_path_rate=0.0,
                    num_feat=16)
    model = model.eval().to(torch.bfloat16)
    x = torch.randn(1, 3, 8, 8, dtype=torch.bfloat16)
    return model, x
