"""The root-cause classes a rule's `cause` names, in words."""

CAUSES = {
    "build-mismatch": "an extension built for another torch or C++ ABI",
    "extension-missing": "flash-attn or its compiled CUDA extension is missing",
    "cuda-mismatch": "the wheel was built for another CUDA major than torch",
    "glibc": "the wheel needs a newer glibc / libstdc++ than this OS has",
    "gpu-arch": "the GPU is too old or too new for the installed kernels",
    "torch-arch": "torch (or an extension) was built without this GPU's architecture",
    "bf16-unsupported": "bf16 requested on a GPU without native bf16",
    "fp32-model": "a model loaded or computing in fp32 reaches a half-precision-only kernel",
    "dtype-promotion": "an implicit fp32 promotion inside the forward pass",
    "autocast-scope": "the forward runs outside autocast, or autocast was disabled",
    "version-pair": "two releases known not to work together",
    "head-dim": "the head dimension is over the kernel's limit",
    "triton-bf16": "a Triton compiler bug on bf16",
    "kernel-selection": "PyTorch SDPA could not use (or chose not to use) a fused kernel",
    "harmless": "a harmless message: nothing to fix",
}


def label(cause) -> str:
    return CAUSES.get(cause or "", "other")
