"""attn-doctor: a doctor and auto-fixer for the FlashAttention / mixed-precision stack of PyTorch."""

__version__ = "0.1.0"
