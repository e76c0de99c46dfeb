"""ibm-fms GPTBigCode in bf16, one cached decoding step (use_cache, a 1-token query after a
7-token cache): GPTBigCodeHeadless then builds its own all-ones mask for SDPA."""
import torch


def _shim_inductor():
    # ibm-fms 0.0.3/0.0.4 patch torch._inductor internals at import (fms.distributed.tensorparallel)
    # that torch 2.13 no longer has; give them empty stand-ins so the package imports. Nothing on
    # the traced (eager, single-process) path uses them.
    import torch._inductor.codegen.wrapper as wrapper
    import torch._inductor.ir as ir

    for name in ("Wait", "AllReduce"):
        if not hasattr(ir, name):
            setattr(ir, name, type(name, (), {}))
    if not hasattr(wrapper, "WrapperCodeGen"):
        wrapper.WrapperCodeGen = type("WrapperCodeGen", (), {})


def build():
    _shim_inductor()
    from fms.models.gpt_bigcode import GPTBigCode, GPTBigCodeConfig

    torch.manual_seed(0)
    # (the position table's size is max_pos in 0.0.3, max_expected_seq_len in 0.0.4: left at 512)
    config = GPTBigCodeConfig(src_vocab_size=64, emb_dim=32, nheads=4, nlayers=1, multiquery_attn=True)
    model = GPTBigCode(config).eval().to(torch.bfloat16)
    past_len, head_dim = 7, config.emb_dim // config.nheads
    # multi-query attention: one kv head; cache entries are (b, kvheads, seq, head_dim)
    past = [(torch.randn(1, 1, past_len, head_dim, dtype=torch.bfloat16),
             torch.randn(1, 1, past_len, head_dim, dtype=torch.bfloat16))
            for _ in range(config.nlayers)]
    x = torch.full((1, 1), 5, dtype=torch.long)  # one new token (not pad_id 0)
    return model, {"x": x, "past_key_value_states": past, "use_cache": True}
