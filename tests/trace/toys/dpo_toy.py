"""A DPO-like batch through a real transformers Qwen2 in bf16 with SDPA: two sequences, the second
left-padded (its first positions are padding under the causal mask: query rows that see no key),
labels of -100 on the padding and the prompt. On an H100 or H200 with torch 2.11 and cuDNN 9.19 the
kernel SDPA picks (cuDNN) computes those padding rows off float64 at every length, and returns NaN
dQ at lengths of 64 mod 128 (pytorch/pytorch#196678) for every row."""
import torch


def build(seq=768, pad=37, labels=True, device="cpu"):
    import transformers

    config = transformers.Qwen2Config(hidden_size=256, intermediate_size=512, num_hidden_layers=1,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=512,
                                      max_position_embeddings=4096, attn_implementation="sdpa")
    torch.manual_seed(0)
    with torch.device(device):
        model = transformers.Qwen2ForCausalLM(config).to(torch.bfloat16)
    ids = torch.randint(3, 500, (2, seq), device=device)
    mask = torch.ones(2, seq, dtype=torch.long, device=device)
    mask[1, :pad] = 0  # left padding
    ids[1, :pad] = 0
    inputs = {"input_ids": ids, "attention_mask": mask}
    if labels:
        lab = ids.clone()
        lab[:, : seq // 2] = -100  # the prompt
        lab[1, : pad + seq // 2] = -100
        inputs["labels"] = lab
    return model, inputs
