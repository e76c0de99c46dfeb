"""Tiny config.json files of real architectures, as a user's checkpoint folder holds them (the
tracer builds the model from the config on meta; no weights). Shapes are small but keep what the
attention path depends on: grouped-query heads, explicit head_dim, sliding windows, soft-capping,
rotary, the encoder-decoder split and a vision tower."""
import json
import os

_DEC = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 128, "max_position_embeddings": 64}

CONFIGS = {
    "llama": dict(_DEC, model_type="llama", architectures=["LlamaForCausalLM"], torch_dtype="bfloat16"),
    "mistral": dict(_DEC, model_type="mistral", sliding_window=32, torch_dtype="bfloat16"),
    "qwen2": dict(_DEC, model_type="qwen2", architectures=["Qwen2ForCausalLM"], torch_dtype="bfloat16"),
    "qwen3": dict(_DEC, model_type="qwen3", head_dim=16, torch_dtype="bfloat16"),
    "gemma": dict(_DEC, model_type="gemma", head_dim=16, torch_dtype="bfloat16"),
    "gemma2": dict(_DEC, model_type="gemma2", architectures=["Gemma2ForCausalLM"], head_dim=16,
                   sliding_window=32, query_pre_attn_scalar=16, attn_logit_softcapping=50.0,
                   final_logit_softcapping=30.0, torch_dtype="bfloat16"),
    "phi3": dict(_DEC, model_type="phi3", num_key_value_heads=4, pad_token_id=0, torch_dtype="bfloat16"),
    "gpt_neox": {"model_type": "gpt_neox", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                 "num_attention_heads": 4, "vocab_size": 128, "max_position_embeddings": 64,
                 "rotary_pct": 0.25, "torch_dtype": "float16"},
    "gpt2": {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_embd": 64, "n_layer": 2, "n_head": 4,
             "n_positions": 64, "vocab_size": 128},
    "bert": {"model_type": "bert", "architectures": ["BertForMaskedLM"], "hidden_size": 64, "intermediate_size": 128,
             "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 128, "max_position_embeddings": 64},
    "opt": {"model_type": "opt", "architectures": ["OPTForCausalLM"], "hidden_size": 64, "ffn_dim": 128,
            "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 128, "max_position_embeddings": 64,
            "word_embed_proj_dim": 64, "torch_dtype": "float16"},
    "falcon": {"model_type": "falcon", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
               "num_kv_heads": 2, "new_decoder_architecture": True, "vocab_size": 128, "torch_dtype": "bfloat16"},
    "t5": {"model_type": "t5", "architectures": ["T5ForConditionalGeneration"], "d_model": 64, "d_kv": 16,
           "d_ff": 128, "num_layers": 2, "num_decoder_layers": 2, "num_heads": 4, "vocab_size": 128,
           "decoder_start_token_id": 0, "pad_token_id": 0},
    "llava": {"model_type": "llava", "architectures": ["LlavaForConditionalGeneration"], "image_token_index": 127,
              "image_seq_length": 4,
              "projector_hidden_act": "gelu", "vision_feature_layer": -1,
              "vision_feature_select_strategy": "default", "torch_dtype": "bfloat16",
              "text_config": dict(_DEC, model_type="llama"),
              "vision_config": {"model_type": "clip_vision_model", "hidden_size": 32, "intermediate_size": 64,
                                "num_hidden_layers": 2, "num_attention_heads": 2, "image_size": 28,
                                "patch_size": 14, "projection_dim": 32}},
}

# Releases that lack an architecture (transformers added it later).
ADDED_IN = {"qwen3": (4, 51)}


def write(root, name, extra=None):
    """Write CONFIGS[name] (updated with ``extra``) as ROOT/NAME/config.json; return the folder."""
    folder = os.path.join(str(root), name)
    os.makedirs(folder, exist_ok=True)
    data = dict(CONFIGS[name], **(extra or {}))
    with open(os.path.join(folder, "config.json"), "w") as fh:
        json.dump(data, fh, indent=1)
    return folder
