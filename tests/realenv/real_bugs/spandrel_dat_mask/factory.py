"""spandrel DAT in bf16, fed an image whose size differs from img_size (the shift-window mask is
then rebuilt per call in calculate_mask)."""
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

    class InterpolationMode:  # only referenced, never used by DAT
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
    from spandrel.architectures.DAT import DAT

    torch.manual_seed(0)
    # rg 1, block 0 is a shifted-window block; img_size 16 but an 8x8 input -> calculate_mask(H, W)
    # built on CPU: DAT's __init__ calls .item() (drop-path rates), which meta cannot; the tracer
    # moves the model to its device
    with torch.device("cpu"):
        model = DAT(img_size=16, in_chans=3, embed_dim=16, split_size=[2, 4], depth=[1, 1],
                    num_heads=[2, 2], expansion_factor=2.0, upscale=2, drop_path_rate=0.0)
    model = model.eval().to(torch.bfloat16)
    x = torch.randn(1, 3, 8, 8, dtype=torch.bfloat16)
    return model, x
