"""The training-plan readers on real config files of every framework (tests/fixtures/configs/real/<framework>/,
each with its source in SOURCES.toml: repository, path, commit), judged on recorded T4, A100 and H100
reports; check --gpu; and configs that cannot be read or are not recognised.

EXPECTED: for each real file, the framework it is read as, part of the plan it gives, and the config
findings (errors and warnings) on the T4, the A100 and the H100 reports. Each row was checked against
the framework's own code (the readers' docstrings say where each rule of reading comes from).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from attn_doctor.core import diagnose
from attn_doctor.gather import load_facts_file
from attn_doctor.probes.configs import probe_config
from attn_doctor.rules.loader import load_recipes

ROOT = Path(__file__).resolve().parents[1]

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

REAL = ROOT / "tests" / "fixtures" / "configs" / "real"
FACTS = ROOT / "tests" / "fixtures" / "facts"
FRAMEWORKS = ("llamafactory", "axolotl", "torchtune", "trl", "ms-swift", "accelerate", "deepspeed", "torchtitan", "litgpt", "transformers",
              "llm-foundry", "verl", "oumi", "nanotron", "open-instruct", "h2o-llmstudio", "kohya-sd-scripts", "musubi-tuner",
              "onetrainer", "simpletuner", "nemo", "nemo-rl", "megatron-bridge", "composer", "lightning", "gpt-neox",
              "prime-rl", "espnet")

EXPECTED = {
    # ESPnet (issue 53): use_amp autocasts to bf16 wherever torch.cuda.is_bf16_supported() (emulated on a T4:
    # AD501), else fp16, with a GradScaler; no use_amp is float32; train_dtype is the weights
    'espnet/espnet_librispeech__asr1_train_asr_conformer7_wavlm_large.yaml': ('espnet', {'compute_dtype': 'float32', 'param_dtype': 'float32'},
        (), (), ()),
    'espnet/espnet_librispeech__asr1_train_asr_e_branchformer.yaml': ('espnet', {'compute_dtype': 'bfloat16', 'loss_scaling': True},
        ('AD501',), (), ()),
    'espnet/espnet_ljspeech__tts1_train_vits.yaml': ('espnet', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32'},
        ('AD501',), (), ()),
    'espnet/espnet_owsm_v3.1__s2t1_train_s2t_ebf_conv2d_size1024_e18_d18_piecewise_lr2e-4_warmup60k_flashattn.yaml': (
        'espnet', {'compute_dtype': 'bfloat16'}, ('AD501',), (), ()),
    # prime-rl (issue 53): FSDP2 computes in bf16 whatever the file says (no key: AD501 on a T4 says there is
    # no setting to change); optimization_dtype is the master weights; [trainer.model] wins over [model]
    'prime-rl/primerl_glm-4.5-air_search.toml': ('prime-rl', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32',
                                                              'attention': 'flash_attention_3'},
        ('AD501', 'AD502'), ('AD502',), ('AD505',)),
    'prime-rl/primerl_glm-5.2_swe-llmd.toml': ('prime-rl', {'compute_dtype': 'bfloat16', 'attention': 'flash_attention_2'},
        ('AD501', 'AD502'), (), ('AD505',)),
    'prime-rl/primerl_reverse-text_rl.toml': ('prime-rl', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32'},
        ('AD501',), (), ()),
    'prime-rl/primerl_vlm_sft_moe_sft.toml': ('prime-rl', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16',
                                                           'reduce_dtype': 'bfloat16', 'attention': 'flash_attention_2'},
        ('AD501', 'AD502'), (), ('AD505',)),
    # GPT-NeoX (issue 53): `precision`, else DeepSpeed's fp16 / bf16 blocks; a model file without either
    # (mistral_7B, merged with a setup file at launch) assumes none; "flash" in attention_config is flash-attn
    'gpt-neox/gptneox_1-3B-transformer-engine.yml': ('gpt-neox', {'compute_dtype': 'float16', 'param_dtype': 'float32'},
        (), (), ()),
    'gpt-neox/gptneox_125M.yml': ('gpt-neox', {'compute_dtype': 'float16', 'param_dtype': 'float32'},
        (), (), ()),
    'gpt-neox/gptneox_bf16_125M.yml': ('gpt-neox', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32'},
        ('AD501',), (), ()),
    'gpt-neox/gptneox_mistral_7B.yml': ('gpt-neox', {'attention': 'flash_attention_2'},
        ('AD502',), (), ('AD505',)),
    'gpt-neox/gptneox_posttraining_llama3-8b-sft.yml': ('gpt-neox', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32',
                                                                      'attention': 'flash_attention_2'},
        ('AD501', 'AD502'), (), ('AD505',)),
    # issue 53: Composer outside LLM Foundry (Composer's GPU default amp_fp16, not LLM Foundry's amp_bf16), and
    # Lightning Trainer configs (LightningCLI, Hydra; Lightning's default 32-true, never another framework's)
    'composer/diffusion_SD-2-base-256.yaml': ('composer', {'compute_dtype': 'float16', 'param_dtype': 'float32'},
        (), (), ()),
    'composer/diffusion_mcli_SDXL-base-256.yaml': ('composer', {'compute_dtype': 'float16', 'param_dtype': 'float32'},
        (), (), ()),
    'composer/resnet50_mild.yaml': ('composer', {'compute_dtype': 'float16', 'param_dtype': 'float32'},
        (), (), ()),
    'lightning/hydra_example_full.yaml': ('lightning', {'compute_dtype': 'float32', 'param_dtype': 'float32'},
        (), (), ()),
    'lightning/terratorch_burn_scars.yaml': ('lightning', {'compute_dtype': 'float16', 'param_dtype': 'float32'},
        (), (), ()),
    'lightning/terratorch_eurosat.yaml': ('lightning', {'compute_dtype': 'float32', 'param_dtype': 'float32'},
        (), (), ()),
    'accelerate/0_30_0_sagemaker.yaml': ('accelerate', {'compute_dtype': 'float16', 'param_dtype': 'float32'},
        (), (), ()),
    'accelerate/0_34_0_fp8.yaml': ('accelerate', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'fp8': True},
        ('AD501', 'AD510'), ('AD510',), ('AD510',)),
    'accelerate/deepspeed.yaml': ('accelerate', {'compute_dtype': 'float32', 'param_dtype': 'float32'},
        (), (), ()),
    'accelerate/fp8.yaml': ('accelerate', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'fp8': True},
        ('AD501', 'AD510'), ('AD510',), ('AD510',)),
    'accelerate/fsdp2.yaml': ('accelerate', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32'},
        ('AD501',), (), ()),
    'accelerate/fsdp_qlora.yaml': ('accelerate', {'compute_dtype': 'float32', 'param_dtype': 'float32'},
        (), (), ()),
    'accelerate/multi_gpu.yaml': ('accelerate', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32'},
        ('AD501',), (), ()),
    'accelerate/zero3.yaml': ('accelerate', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32'},
        ('AD501',), (), ()),
    'axolotl/3b-fp8-fsdp2.yaml': ('axolotl', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'tf32': 'auto', 'fp8': True, 'attention': 'flex_attention'},
        ('AD501', 'AD510'), ('AD510',), ('AD510',)),
    'axolotl/config-7b-lora.yml': ('axolotl', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'tf32': True, 'attention': 'xformers'},
        ('AD501', 'AD505', 'AD509'), ('AD505',), ('AD505',)),
    'axolotl/config.yml': ('axolotl', {'compute_dtype': 'float16', 'param_dtype': 'float16', 'tf32': True, 'attention': 'auto'},
        ('AD509',), (), ()),
    'axolotl/falcon-e-3b-ft.yaml': ('axolotl', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'tf32': False, 'attention': 'flash_attention_2'},
        ('AD501', 'AD502'), (), ('AD505',)),
    'axolotl/gpt-oss-20b-fft-deepspeed-zero3.yaml': ('axolotl', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'tf32': True, 'attention': 'kernels-community/vllm-flash-attn3'},
        ('AD501', 'AD502', 'AD509'), ('AD502',), ('AD505',)),
    'axolotl/lora-3.5.yaml': ('axolotl', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'tf32': False, 'attention': 'auto'},
        ('AD501',), (), ()),
    'axolotl/lora-mps.yml': ('axolotl', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'tf32': True, 'attention': 'sdpa'},
        ('AD501', 'AD509'), (), ()),
    'axolotl/qlora-fsdp.yml': ('axolotl', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'tf32': False, 'attention': 'flash_attention_2'},
        ('AD501', 'AD502'), (), ('AD505',)),
    'axolotl/qlora.yml': ('axolotl', {'compute_dtype': 'float16', 'param_dtype': 'float16', 'tf32': False, 'attention': 'flash_attention_2'},
        ('AD502',), (), ('AD505',)),
    'axolotl/trinity-nano-preview-qlora.yaml': ('axolotl', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'tf32': False, 'attention': 'sdpa'},
        ('AD501',), (), ()),
    'deepspeed/bf16_full.json': ('deepspeed', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32'},
        ('AD501',), (), ()),
    'deepspeed/deepspeed_bsz24_fp32_config.json': ('deepspeed', {'compute_dtype': 'float32'},
        (), (), ()),
    'deepspeed/ds_config_func_bs8_zero2.json': ('deepspeed', {'compute_dtype': 'float16', 'param_dtype': 'float32'},
        (), (), ()),
    'deepspeed/ds_config_zero2_bf16.json': ('deepspeed', {'compute_dtype': 'auto'},
        (), (), ()),
    'deepspeed/ds_z3_config.json': ('deepspeed', {'compute_dtype': 'auto'},
        (), (), ()),
    'deepspeed/ds_z3_fp8_config.json': ('deepspeed', {'compute_dtype': 'auto'},
        (), (), ()),
    'deepspeed/sp-alst.ds-config.json': ('deepspeed', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32'},
        ('AD501',), (), ()),
    'deepspeed/traineagle3_ds_config.json': ('deepspeed', {'compute_dtype': 'float16', 'param_dtype': 'float32'},
        (), (), ()),
    'litgpt/debug.yaml': ('litgpt', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32'},
        ('AD501',), (), ()),
    'litgpt/llama-3.1-8b_full.yaml': ('litgpt', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16'},
        ('AD501',), (), ()),
    'litgpt/llama-3.2-1B_full.yaml': ('litgpt', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16'},
        ('AD501',), (), ()),
    'litgpt/mistral-7b_kaggle.yaml': ('litgpt', {'compute_dtype': 'float32', 'param_dtype': 'float32'},
        (), (), ()),
    'litgpt/phi-2_qlora.yaml': ('litgpt', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16'},
        ('AD501',), (), ()),
    'litgpt/tiny-llama_lora.yaml': ('litgpt', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16'},
        ('AD501',), (), ()),
    'litgpt/tinyllama.yaml': ('litgpt', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32'},
        ('AD501',), (), ()),
    'llamafactory/badam_llama3_full_sft.yaml': ('llamafactory', {'compute_dtype': 'auto', 'attention': 'auto'},
        (), (), ()),
    'llamafactory/ds_z3_config.json': ('deepspeed', {'compute_dtype': 'auto'},
        (), (), ()),
    'llamafactory/galore_llama3_full_sft.yaml': ('llamafactory', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'auto'},
        ('AD501',), (), ()),
    'llamafactory/llama3_fp8_deepspeed_sft.yaml': ('llamafactory', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'fp8': True, 'attention': 'auto'},
        ('AD501', 'AD510'), ('AD510',), ('AD510',)),
    'llamafactory/qwen3_full_sft.yaml': ('llamafactory', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'auto'},
        ('AD501',), (), ()),
    'llamafactory/qwen3_full_sft_fsdp2.yaml': ('llamafactory', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'flash_attention_2'},
        ('AD501', 'AD502'), (), ('AD508',)),
    'llamafactory/qwen3vl_lora_sft_local_8b_v100.yaml': ('llamafactory', {'compute_dtype': 'float16', 'param_dtype': 'float16', 'attention': 'sdpa',
                                                           'adapter': 'lora', 'adapter_dtype': 'float32'},
        (), (), ()),
    'llamafactory/qwen3vlmoe_lora_sft_fsdp.yaml': ('llamafactory', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'eager',
                                                    'adapter': 'lora', 'adapter_dtype': 'float32'},
        ('AD501',), (), ()),
    'ms-swift/deepspeed_sft.yaml': ('ms-swift', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'auto'},
        ('AD501',), (), ()),
    'ms-swift/frozen_lake_colocate.yaml': ('ms-swift', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'flash_attention_2'},
        ('AD501', 'AD502'), (), ('AD505',)),
    'ms-swift/fsdp2.json': ('unknown', {},
        ('AD513',), ('AD513',), ('AD513',)),
    'ms-swift/megatron_sft.yaml': ('ms-swift', {'compute_dtype': 'auto', 'param_dtype': 'float32', 'attention': 'flash_attention_2'},
        ('AD502',), (), ('AD505',)),
    'ms-swift/pr319_baichuan2_7b_chat_lora_ddp_sft.json': ('ms-swift', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'auto'},
        ('AD501',), (), ()),
    'ms-swift/ray_sft.yaml': ('ms-swift', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'flash_attention_2'},
        ('AD501', 'AD502'), (), ('AD505',)),
    'ms-swift/sft.json': ('ms-swift', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'auto'},
        ('AD501',), (), ()),
    'ms-swift/v2.6.1_tests_llm_config_sft.json': ('ms-swift', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'auto'},
        ('AD501',), (), ()),
    'ms-swift/yaml_sft.yaml': ('ms-swift', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'flash_attention_2'},
        ('AD501', 'AD502'), (), ('AD505',)),
    'ms-swift/zero3.json': ('deepspeed', {'compute_dtype': 'auto'},
        (), (), ()),
    'torchtitan/benchmark_model.toml': ('torchtitan', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'sdpa'},
        ('AD501',), (), ()),
    'torchtitan/debug_model.toml': ('torchtitan', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'sdpa'},
        ('AD501',), (), ()),
    'torchtitan/deepseek_v3_16b.toml': ('torchtitan', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'sdpa'},
        ('AD501',), (), ()),
    'torchtitan/full.toml': ('torchtitan', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'sdpa'},
        ('AD501',), (), ()),
    'torchtitan/llama3_405b.toml': ('torchtitan', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'fp8': True, 'attention': 'sdpa'},
        ('AD501', 'AD510'), ('AD510',), ('AD510',)),
    'torchtitan/llama3_8b.toml': ('torchtitan', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'sdpa'},
        ('AD501',), (), ()),
    'torchtitan/qwen3_0.6b.toml': ('torchtitan', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'sdpa'},
        ('AD501',), (), ()),
    'torchtitan/v0.1.0_llama3_405b.toml': ('torchtitan', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'fp8': True, 'attention': 'sdpa'},
        ('AD501', 'AD510'), ('AD510',), ('AD510',)),
    'torchtune/1B_lora_single_device.yaml': ('torchtune', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'sdpa'},
        ('AD501',), (), ()),
    'torchtune/70B_full.yaml': ('torchtune', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'sdpa'},
        ('AD501',), (), ()),
    'torchtune/70B_full_multinode.yaml': ('torchtune', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'sdpa'},
        ('AD501',), (), ()),
    'torchtune/8B_full.yaml': ('torchtune', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'sdpa'},
        ('AD501',), (), ()),
    'torchtune/8B_qat_full.yaml': ('torchtune', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'sdpa'},
        ('AD501',), (), ()),
    'torchtune/8B_qlora_single_device.yaml': ('torchtune', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'sdpa'},
        ('AD501',), (), ()),
    'torchtune/alpaca_llama2_full_finetune.yaml': ('torchtune', {'compute_dtype': 'float32', 'param_dtype': 'float32', 'attention': 'sdpa'},
        (), (), ()),
    'torchtune/qwen3B_async_grpo.yaml': ('torchtune', {'compute_dtype': 'unset', 'attention': 'sdpa'},
        (), (), ()),
    'transformers/circle_rope_config.json': ('transformers', {'param_dtype': 'bfloat16'},
        ('AD501',), (), ()),
    'transformers/clip-vit-large-patch14_config.json': ('transformers', {'param_dtype': 'float32'},
        (), (), ()),
    'transformers/laneformer-tp-2B-nemov2phase1-step-620000_config.json': ('transformers', {'param_dtype': 'float32'},
        (), (), ()),
    'transformers/llama_60m.json': ('transformers', {},
        (), (), ()),
    'transformers/mobilellm-125M_config.json': ('transformers', {'param_dtype': 'float16'},
        (), (), ()),
    'transformers/qwen3_moe_debug_config.json': ('transformers', {'param_dtype': 'bfloat16'},
        ('AD501',), (), ()),
    'transformers/traineagle3_config.json': ('transformers', {'param_dtype': 'float16'},
        (), (), ()),
    'trl/dpo_1b_fp16.yml': ('trl', {'compute_dtype': 'float16', 'param_dtype': 'float32', 'attention': 'auto'},
        (), (), ()),
    # TRL's CLI example: model_name_or_path and dataset_name only, which transformers' example scripts write
    # too: nothing only TRL writes, so TRL's bf16 default is not assumed (issue 53), and nothing is judged
    'trl/example_config.yaml': ('unknown', {},
        (), (), ()),
    'trl/handbook_apo.yaml': ('trl', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'flash_attention_2'},
        ('AD501', 'AD502'), (), ('AD505',)),
    'trl/handbook_config.yaml': ('trl', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'flash_attention_2'},
        ('AD501', 'AD502'), (), ('AD505',)),
    'trl/handbook_config_qlora.yaml': ('trl', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'flash_attention_2'},
        ('AD501', 'AD502'), (), ('AD505',)),
    'trl/handbook_dpo_config_full.yaml': ('trl', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'auto'},
        ('AD501',), (), ()),
    'trl/handbook_recipes_config_full.yaml': ('trl', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'eager'},
        ('AD501',), (), ()),
    'trl/handbook_sft_config_full.yaml': ('trl', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'tf32': True, 'attention': 'flash_attention_2'},
        ('AD501', 'AD502', 'AD509'), (), ('AD505',)),
    'h2o-llmstudio/example_oasst2.yaml': ('h2o-llmstudio', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'auto', 'quantization': 'nf4', 'adapter': 'qlora'},
        ('AD501',), (), ()),
    'h2o-llmstudio/test_causal_binary_classification_modeling_cfg.yaml': ('h2o-llmstudio', {'compute_dtype': 'float16', 'param_dtype': 'float32', 'attention': 'auto', 'quantization': 'nf4', 'adapter': 'qlora'},
        (), (), ()),
    'h2o-llmstudio/test_causal_language_modeling_oasst_cfg.yaml': ('h2o-llmstudio', {'compute_dtype': 'float16', 'param_dtype': 'float32', 'attention': 'auto', 'quantization': 'nf4', 'adapter': 'qlora'},
        (), (), ()),
    'h2o-llmstudio/test_causal_language_modeling_oasst_cpu_cfg.yaml': ('h2o-llmstudio', {'compute_dtype': 'float32', 'param_dtype': 'float32', 'attention': 'auto', 'adapter': 'lora'},
        (), (), ()),
    'h2o-llmstudio/test_data_cfg.yaml': ('h2o-llmstudio', {'compute_dtype': 'bfloat16', 'param_dtype': 'float16', 'attention': 'auto', 'adapter': 'lora'},
        ('AD501',), (), ()),
    'h2o-llmstudio/test_sequence_to_sequence_modeling_oasst_cfg.yaml': ('h2o-llmstudio', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'auto', 'adapter': 'lora'},
        ('AD501',), (), ()),
    'kohya-sd-scripts/kohya_ss_SDXL-LoRA-AI_characters-standard-v1.1.json': ('kohya-sd-scripts', {'compute_dtype': 'float16', 'param_dtype': 'float16', 'attention': 'xformers', 'adapter': 'lora'},
        ('AD505',), ('AD505',), ('AD505',)),
    'kohya-sd-scripts/kohya_ss_dreambooth_sd3_bdsqlsz_v1.json': ('kohya-sd-scripts', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'sdpa'},
        ('AD501',), (), ()),
    'kohya-sd-scripts/kohya_ss_finetune_SDXL-AI_Now-PagedAdamW8bit-v1.0.json': ('kohya-sd-scripts', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'xformers'},
        ('AD501', 'AD505'), ('AD505',), ('AD505',)),
    'kohya-sd-scripts/kohya_ss_flux1D-adamw8bit-fp8.json': ('kohya-sd-scripts', {'compute_dtype': 'bfloat16', 'fp8': False, 'attention': 'sdpa', 'quantization': 'fp8-weights', 'adapter': 'lora'},
        ('AD501',), (), ()),
    'kohya-sd-scripts/kohya_ss_sd15-EDG_LoraOptiSettings.json': ('kohya-sd-scripts', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'eager', 'adapter': 'lora'},
        ('AD501',), (), ()),
    'kohya-sd-scripts/lora-scripts_Example.toml': ('kohya-sd-scripts', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'xformers', 'adapter': 'locon'},
        ('AD501', 'AD505'), ('AD505',), ('AD505',)),
    'kohya-sd-scripts/lora-scripts_default.toml': ('kohya-sd-scripts', {'compute_dtype': 'float16', 'param_dtype': 'float16', 'attention': 'xformers', 'adapter': 'lora'},
        ('AD505',), ('AD505',), ('AD505',)),
    'kohya-sd-scripts/lora-scripts_lora.toml': ('kohya-sd-scripts', {'compute_dtype': 'float16', 'param_dtype': 'float16', 'attention': 'xformers', 'adapter': 'lora'},
        ('AD505',), ('AD505',), ('AD505',)),
    'llm-foundry/dbrx-lora-ft.yaml': ('llm-foundry', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'tf32': True, 'attention': 'flash_attention_2', 'adapter': 'lora'},
        ('AD501', 'AD502'), (), ('AD505',)),
    'llm-foundry/hf-llama-3.1-8B.yaml': ('llm-foundry', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'tf32': True, 'attention': 'flash_attention_2'},
        ('AD501', 'AD502'), (), ('AD505',)),
    'llm-foundry/hf_8bit_eval.yaml': ('llm-foundry', {'compute_dtype': 'float16', 'param_dtype': 'float32', 'tf32': True, 'attention': 'eager', 'quantization': 'int8'},
        (), (), ()),
    'llm-foundry/llama-3-8b_domain_adapt.yaml': ('llm-foundry', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'tf32': True, 'attention': 'eager'},
        ('AD501', 'AD511'), ('AD511',), ('AD511',)),
    'llm-foundry/mcli-llama3-finetune.yaml': ('llm-foundry', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'tf32': True, 'attention': 'flash_attention_2'},
        ('AD501', 'AD502'), (), ('AD505',)),
    'llm-foundry/mpt-125m.yaml': ('llm-foundry', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'tf32': True, 'attention': 'flash_attention_2'},
        ('AD501', 'AD502'), (), ('AD505',)),
    'llm-foundry/mpt-7b_triton_2024-03.yaml': ('llm-foundry', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'tf32': True, 'attention': 'triton'},
        ('AD501',), (), ()),
    'llm-foundry/mpt-small-cpu.yaml': ('llm-foundry', {'compute_dtype': 'float32', 'param_dtype': 'float32', 'tf32': True, 'attention': 'eager'},
        (), (), ()),
    'musubi-tuner/musubi-tuner-gui_config.toml': ('musubi-tuner', {'compute_dtype': 'bfloat16', 'fp8': False, 'attention': 'sdpa', 'quantization': 'fp8-weights', 'adapter': 'lora'},
        ('AD501',), (), ()),
    'musubi-tuner/musubi-tuner-gui_test.toml': ('musubi-tuner', {'compute_dtype': 'float16', 'param_dtype': 'bfloat16', 'attention': 'sdpa'},
        ('AD501',), (), ()),
    'musubi-tuner/secourses_ideogram4_automatic_training.toml': ('musubi-tuner', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'sdpa', 'adapter': 'lora'},
        ('AD501',), (), ()),
    'musubi-tuner/secourses_krea2_automatic_training.toml': ('musubi-tuner', {'compute_dtype': 'bfloat16', 'fp8': False, 'attention': 'sdpa', 'quantization': 'fp8-weights', 'adapter': 'lora'},
        ('AD501',), (), ()),
    'musubi-tuner/secourses_musubi_tuner_defaults.toml': ('musubi-tuner', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'unset', 'adapter': 'lora'},
        ('AD501', 'AD511'), ('AD511',), ('AD511',)),
    'musubi-tuner/secourses_qwen_image_defaults.toml': ('musubi-tuner', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'sdpa', 'adapter': 'lora'},
        ('AD501',), (), ()),
    'musubi-tuner/secourses_wan_2_1_automatic_training.toml': ('musubi-tuner', {'compute_dtype': 'bfloat16', 'fp8': False, 'attention': 'sdpa', 'quantization': 'fp8-weights', 'adapter': 'lora'},
        ('AD501',), (), ()),
    'nanotron/config_llamoe.yaml': ('nanotron', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'flash_attention_2'},
        ('AD501', 'AD502'), (), ('AD505',)),
    'nanotron/config_mamba.yaml': ('nanotron', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32'},
        ('AD501',), (), ()),
    'nanotron/config_qwen.yaml': ('nanotron', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'flash_attention_2'},
        ('AD501', 'AD502'), (), ('AD505',)),
    'nanotron/config_resume_training.yaml': ('nanotron', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'sdpa'},
        ('AD501',), (), ()),
    'nanotron/config_tiny_llama.yaml': ('nanotron', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'flash_attention_2'},
        ('AD501', 'AD502'), (), ('AD505',)),
    'nanotron/finemath-3plus.yaml': ('nanotron', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'flash_attention_2'},
        ('AD501', 'AD502'), (), ('AD505',)),
    'nanotron/mup_350m_llama_config.yaml': ('nanotron', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'flash_attention_2'},
        ('AD501', 'AD502'), (), ('AD505',)),
    'nanotron/smollm3_long_context_4k_to_32k.yaml': ('nanotron', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'flash_attention_2'},
        ('AD501', 'AD502'), (), ('AD505',)),
    'onetrainer/2023_sdxl_1.0_LoRA.json': ('onetrainer', {'compute_dtype': 'float16', 'param_dtype': 'float16', 'attention': 'sdpa', 'adapter': 'lora'},
        ('AD511',), ('AD511',), ('AD511',)),
    'onetrainer/chroma_LoRA_8GB.json': ('onetrainer', {'compute_dtype': 'bfloat16', 'fp8': False, 'attention': 'sdpa', 'quantization': 'fp8-weights', 'adapter': 'lora'},
        ('AD501',), (), ()),
    'onetrainer/flux_LoRA.json': ('onetrainer', {'compute_dtype': 'bfloat16', 'attention': 'sdpa', 'quantization': 'nf4', 'adapter': 'lora'},
        ('AD501',), (), ()),
    'onetrainer/hunyuan_video_LoRA.json': ('onetrainer', {'compute_dtype': 'bfloat16', 'fp8': False, 'attention': 'sdpa', 'quantization': 'fp8-weights', 'adapter': 'lora'},
        ('AD501',), (), ()),
    'onetrainer/krea2_LoRA_16GB.json': ('onetrainer', {'compute_dtype': 'bfloat16', 'attention': 'sdpa', 'quantization': 'int8-w8a8', 'adapter': 'lora'},
        ('AD501',), (), ()),
    'onetrainer/sd_1.5.json': ('onetrainer', {'compute_dtype': 'float16', 'param_dtype': 'float32', 'attention': 'sdpa'},
        (), (), ()),
    'onetrainer/sdxl_1.0.json': ('onetrainer', {'compute_dtype': 'float16', 'param_dtype': 'bfloat16', 'attention': 'sdpa'},
        ('AD501',), (), ()),
    'onetrainer/sdxl_1.0_LoRA.json': ('onetrainer', {'compute_dtype': 'float16', 'param_dtype': 'float16', 'attention': 'sdpa', 'adapter': 'lora'},
        (), (), ()),
    'open-instruct/dpo_default.yaml': ('open-instruct', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'flash_attention_2'},
        ('AD501', 'AD502'), (), ('AD505',)),
    'open-instruct/olmo2_1124_7b_sft_pre_autodetect.yaml': ('open-instruct', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'flash_attention_2'},
        ('AD501', 'AD502'), (), ('AD505',)),
    'open-instruct/olmo_1b_mix_example_pre_autodetect.yaml': ('open-instruct', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'eager'},
        ('AD501',), (), ()),
    'open-instruct/tulu2_7b_lora.yaml': ('open-instruct', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'flash_attention_2', 'adapter': 'lora'},
        ('AD501', 'AD502'), (), ('AD505',)),
    'open-instruct/tulu2_7b_qlora_pre_autodetect.yaml': ('open-instruct', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'flash_attention_2', 'quantization': 'nf4', 'adapter': 'qlora'},
        ('AD501', 'AD502'), (), ('AD505',)),
    'open-instruct/tulu3_sft.yaml': ('open-instruct', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'flash_attention_2'},
        ('AD501', 'AD502'), (), ('AD505',)),
    'openrlhf/marti_default_2025-05.yaml': ('openrlhf', {'compute_dtype': 'auto', 'param_dtype': 'auto', 'attention': 'eager'},
        (), (), ()),
    'openrlhf/marti_default_2025-11.yaml': ('openrlhf', {'compute_dtype': 'auto', 'param_dtype': 'auto', 'attention': 'flash_attention_2'},
        ('AD502',), (), ('AD505',)),
    'oumi/gold_train_gptoss120b_qwen06b.yaml': ('oumi', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'sdpa'},
        ('AD501',), (), ()),
    'oumi/gpt_oss_20b_lora_single_gpu_train.yaml': ('oumi', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'eager', 'adapter': 'lora'},
        ('AD501',), (), ()),
    'oumi/llama3_1_8b_pretraining_train.yaml': ('oumi', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'attention': 'sdpa'},
        ('AD501',), (), ()),
    'oumi/llama3_1_8b_qlora_train.yaml': ('oumi', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'sdpa', 'quantization': 'nf4', 'adapter': 'qlora'},
        ('AD501',), (), ()),
    'oumi/molmo_d_full_train.yaml': ('oumi', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'auto'},
        ('AD501',), (), ()),
    'oumi/phi3_dpo_macos_train.yaml': ('oumi', {'compute_dtype': 'float16', 'param_dtype': 'float16', 'attention': 'auto', 'adapter': 'lora'},
        (), (), ()),
    'oumi/phi3_vision_full_train.yaml': ('oumi', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'tf32': True, 'attention': 'flash_attention_2'},
        ('AD501', 'AD502'), (), ('AD505',)),
    'oumi/zephyr_sft_qlora_train.yaml': ('oumi', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'sdpa', 'quantization': 'nf4', 'adapter': 'qlora'},
        ('AD501', 'AD511'), ('AD511',), ('AD511',)),
    'simpletuner/alexsenden_flux-full-finetune-deepspeed-3.json': ('simpletuner', {'compute_dtype': 'float16', 'param_dtype': 'bfloat16', 'tf32': True, 'attention': 'sdpa'},
        ('AD501', 'AD511'), ('AD511',), ('AD511',)),
    'simpletuner/alexsenden_flux-full-finetune-deepspeed-3_config.env': ('simpletuner', {},
        (), (), ()),
    'simpletuner/cascade-stage-c.lycoris-lokr.json': ('simpletuner', {'compute_dtype': 'float32', 'param_dtype': 'float32', 'tf32': True, 'attention': 'sdpa', 'adapter': 'lycoris'},
        (), (), ()),
    'simpletuner/flux.peft-lora.json': ('simpletuner', {'compute_dtype': 'bfloat16', 'tf32': True, 'attention': 'sdpa', 'quantization': 'int8', 'adapter': 'lora'},
        ('AD501',), (), ()),
    'simpletuner/longcat-image.peft-lora.json': ('simpletuner', {'compute_dtype': 'bfloat16', 'tf32': True, 'attention': 'sdpa', 'quantization': 'int8', 'adapter': 'lora'},
        ('AD501',), (), ()),
    'simpletuner/mageflow-image-24g.peft-lora.json': ('simpletuner', {'compute_dtype': 'bfloat16', 'tf32': True, 'fp8': False, 'attention': 'kernels-community/flash-attn2', 'quantization': 'fp8-weights', 'adapter': 'lora'},
        ('AD501', 'AD502'), ('AD505',), ('AD505',)),
    'simpletuner/simpletuner_2024-08_config.env.example.env': ('simpletuner', {'compute_dtype': 'bfloat16', 'param_dtype': 'bfloat16', 'tf32': True, 'attention': 'sdpa', 'adapter': 'lora'},
        ('AD501', 'AD511'), ('AD511',), ('AD511',)),
    'simpletuner/wan2.1-t2v-14b-480p-8xh100.peft-lora+cp-fa3.json': ('simpletuner', {'compute_dtype': 'bfloat16', 'tf32': True, 'fp8': True, 'attention': 'kernels-community/flash-attn3', 'quantization': 'fp8-w8a8', 'adapter': 'lora'},
        ('AD501', 'AD502', 'AD510'), ('AD502', 'AD510'), ('AD505', 'AD510')),
    'verl/_generated_ppo_megatron_trainer.yaml': ('verl', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'flash_attention_2'},
        ('AD501', 'AD502'), (), ('AD505',)),
    'verl/_generated_ppo_trainer.yaml': ('verl', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'flash_attention_2'},
        ('AD501', 'AD502'), (), ('AD505',)),
    'verl/geo3k_multiturn_megatron_grpo.yaml': ('verl', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'flash_attention_2'},
        ('AD501', 'AD502'), (), ('AD505',)),
    'verl/gsm8k_multiturn_grpo.yaml': ('verl', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'flash_attention_2'},
        ('AD501', 'AD502'), (), ('AD505',)),
    'verl/legacy_ppo_trainer.yaml': ('verl', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'flash_attention_2'},
        ('AD501', 'AD502'), (), ('AD505',)),
    'verl/sft_trainer.yaml': ('verl', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'flash_attention_2'},
        ('AD501', 'AD502'), (), ('AD505',)),
    'verl/sft_trainer_engine.yaml': ('verl', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'flash_attention_2'},
        ('AD501', 'AD502'), (), ('AD505',)),
    'verl/v0.2_ppo_trainer.yaml': ('verl', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'flash_attention_2'},
        ('AD501', 'AD502'), (), ('AD505',)),
    'nemo/launcher_fine_tuning_llama_squad.yaml': ('nemo', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'auto'},
        ('AD501',), (), ()),
    'nemo/launcher_peft_gemma_squad.yaml': ('nemo', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'auto', 'adapter': 'lora'},
        ('AD501',), (), ()),
    'nemo/launcher_training_gpt3_mlperf.yaml': ('nemo', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'fp8': True, 'attention': 'auto', 'quantization': 'fp8-weights'},
        ('AD501', 'AD510'), ('AD510',), ('AD510',)),
    'nemo/megatron_gpt_config.yaml': ('nemo', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'eager'},
        ('AD501',), (), ()),
    'nemo/megatron_gpt_finetuning_config.yaml': ('nemo', {'compute_dtype': 'float16', 'param_dtype': 'float32', 'attention': 'auto', 'adapter': 'adapter'},
        (), (), ()),
    'nemo/megatron_llama_config.yaml': ('nemo', {'compute_dtype': 'float32', 'param_dtype': 'float32', 'attention': 'auto'},
        (), (), ()),
    'nemo/nemo2_io_model.yaml': ('nemo', {'compute_dtype': 'float32', 'param_dtype': 'float32', 'attention': 'auto'},
        (), (), ()),
    'nemo/salm_llama3.2-1b_fc_linear_peft.yaml': ('nemo', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'auto', 'adapter': 'lora'},
        ('AD501',), (), ()),
    'nemo-rl/grpo_math_1B.yaml': ('nemo-rl', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'flash_attention_2'},
        ('AD501', 'AD502'), (), ('AD505',)),
    'nemo-rl/grpo_math_1B_megatron.yaml': ('nemo-rl', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'auto'},
        ('AD501',), (), ()),
    'nemo-rl/grpo_math_8B_megatron.yaml': ('nemo-rl', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'auto'},
        ('AD501',), (), ()),
    'nemo-rl/grpo_math_8B_megatron_fp8.yaml': ('nemo-rl', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'fp8': True, 'attention': 'auto'},
        ('AD501', 'AD510'), ('AD510',), ('AD510',)),
    'nemo-rl/sft-llama3.1-8b-1n8g-fsdp2tp1-lora.yaml': ('nemo-rl', {'compute_dtype': 'auto', 'attention': 'auto', 'adapter': 'lora'},
        (), (), ()),
    'nemo-rl/sft-llama3.1-8b-1n8g-megatron-lora.yaml': ('nemo-rl', {'compute_dtype': 'auto', 'attention': 'auto', 'adapter': 'lora'},
        (), (), ()),
    'nemo-rl/sft-qwen2.5-math7b-1n8g-megatron_fused_linear_logprobs.yaml': ('nemo-rl', {'compute_dtype': 'auto', 'attention': 'eager'},
        (), (), ()),
    'nemo-rl/sft.yaml': ('nemo-rl', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'auto'},
        ('AD501',), (), ()),
    'megatron-bridge/ar_to_dlm_3b_dlm.yaml': ('megatron-bridge', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'auto'},
        ('AD501',), (), ()),
    'megatron-bridge/llama32_1b_finetune.yaml': ('megatron-bridge', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'auto', 'adapter': 'lora'},
        ('AD501',), (), ()),
    'megatron-bridge/llama32_1b_pretrain.yaml': ('megatron-bridge', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'auto'},
        ('AD501',), (), ()),
    'megatron-bridge/llama3_8b_pretrain_override_example_megatron_fsdp.yaml': ('megatron-bridge', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'auto'},
        ('AD501',), (), ()),
    'megatron-bridge/quantized_llama3_8b_pretrain_override_example.yaml': ('megatron-bridge', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'auto'},
        ('AD501',), (), ()),
    'megatron-bridge/qwen3_moe_30b_a3b_pretrain_override_example.yaml': ('megatron-bridge', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'auto'},
        ('AD501',), (), ()),
    'megatron-bridge/qwen3_vl_235b_a22b_pretrain_mfsdp_override_example.yaml': ('megatron-bridge', {'compute_dtype': 'bfloat16', 'param_dtype': 'float32', 'attention': 'auto'},
        ('AD501',), (), ()),
}


def real_files():
    return sorted(str(p.relative_to(REAL)) for p in REAL.rglob("*") if p.is_file() and p.name != "SOURCES.toml")


def test_every_real_file_is_in_the_table_and_has_its_source():
    assert sorted(EXPECTED) == real_files()
    for folder in REAL.iterdir():
        sources = tomllib.loads((folder / "SOURCES.toml").read_text())["file"]
        names = {s["name"] for s in sources}
        assert names == {p.name for p in folder.iterdir() if p.name != "SOURCES.toml"}, folder
        for source in sources:
            assert re.fullmatch(r"[0-9a-f]{40}", source["commit"]) and "/" in source["repo"] and source["path"], source
            assert source["url"] == f"https://github.com/{source['repo']}/blob/{source['commit']}/{source['path']}", source


def test_at_least_three_real_files_per_framework():
    read_as = {}
    for name, (kind, *_rest) in EXPECTED.items():
        read_as.setdefault(kind, []).append(name)
    for framework in FRAMEWORKS:
        assert len(read_as.get(framework, [])) >= 3, (framework, read_as.get(framework))


@pytest.fixture(scope="module")
def judged():
    recipes = load_recipes(None)
    reports = {gpu: load_facts_file(FACTS / f"{gpu}.json") for gpu in ("t4", "a100", "h100")}
    out = {}
    for name in real_files():
        config = probe_config(str(REAL / name), {})
        found = []
        for facts in reports.values():
            facts.configs = [config]
            found.append(tuple(sorted(r.rule for r in diagnose(facts, recipes).results
                                      if r.area == "config" and r.status in ("error", "warning"))))
        out[name] = (config, found)
    return out


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_config_plan_and_findings_on_t4_a100_h100(judged, name):
    kind, plan, t4, a100, h100 = EXPECTED[name]
    config, found = judged[name]
    assert config.status == "ok" and config.kind == kind, (config.kind, config.error, config.why)
    assert {k: config.plan[k].value for k in plan if k in config.plan} == plan
    assert found == [t4, a100, h100]
    for setting in config.plan.values():  # every value says where it came from
        assert setting.source in ("file", "default", "env") and (setting.key or setting.source != "file")
        assert setting.source != "default" or setting.note, setting


def test_each_finding_names_the_file_and_a_remedy_in_its_own_syntax(judged):
    recipes = load_recipes(None)
    facts = load_facts_file(FACTS / "t4.json")
    seen = set()
    for name, (config, _found) in judged.items():
        facts.configs = [config]
        for result in diagnose(facts, recipes).results:
            if result.area != "config" or result.status not in ("error", "warning") or result.rule in ("AD512", "AD513"):
                continue
            assert result.message.startswith(config.path + ":"), result.message
            summary = result.remedies[0].summary
            if "has no setting here" in summary:
                assert not config.edits.get("attention=sdpa") or not config.edits.get("precision=fp16")  # said only where a key is missing
            elif config.kind == "transformers" and "not how a job trains" in summary:
                # a checkpoint's saved dtype is no training precision: the trainer's setting is named instead
                assert "precision=fp16" not in config.edits and "TrainingArguments fp16=True" in summary, summary
            elif config.format == "toml":
                assert re.search(r"(\[\w+\] )?\w+ = ", summary), summary  # a TOML key (in its section where it has one)
            elif config.format == "json":
                assert '": ' in summary, summary
            elif "In " in summary and result.rule != "AD508":
                assert re.search(r": [\w.]+: \S", summary) and '"' not in summary.split(": ", 1)[1][:3], summary
            seen.add(config.format)
    assert seen == {"yaml", "json", "toml", "env"}


def test_torchtune_is_never_told_to_use_fp16_and_torchtitan_neither(judged):
    recipes = load_recipes(None)
    facts = load_facts_file(FACTS / "t4.json")
    for name in ("torchtune/8B_full.yaml", "torchtitan/llama3_8b.toml"):
        facts.configs = [judged[name][0]]
        result = next(r for r in diagnose(facts, recipes).results if r.rule == "AD501")
        assert "fp32" in result.message and "fp16" not in result.remedies[0].summary, result


def cli(*args, env=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "attn_doctor", *args], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **(env or {})))


def test_check_gpu_judges_a_config_for_a_gpu_this_machine_lacks(tmp_path):
    cfg = REAL / "axolotl" / "config.yml"
    env = {"ATTN_DOCTOR_CACHE_DIR": str(tmp_path / "cache")}
    proc = cli("check", "--gpu", "T4", "--no-sample", "-c", str(cfg), "--json", env=env)
    doc = json.loads(proc.stdout)
    assert doc["facts"]["assumed_gpu"]["name"] == "Tesla T4" and doc["facts"]["assumed_gpu"]["capability"] == "7.5"
    results = {r["rule"]: r for r in doc["results"]}
    assert results["AD509"]["status"] == "error" and "tf32: true" in results["AD509"]["message"]
    assert results["AD101"]["status"] == "skipped"  # "no GPU here" is not what --gpu asks
    assert results["AD108"]["status"] == results["AD107"]["status"] == "skipped"  # this machine's driver is not the job's
    same = json.loads(cli("check", "--capability", "7.5", "--no-sample", "-c", str(cfg), "--json", env=env).stdout)
    assert {r["rule"]: r["status"] for r in same["results"]}["AD509"] == "error"
    fa2 = json.loads(cli("check", "--gpu", "h100", "--no-sample", "-c", str(REAL / "trl" / "handbook_config.yaml"), "--json", env=env).stdout)
    ad505 = next(r for r in fa2["results"] if r["rule"] == "AD505")
    # judged for a GPU by name (--gpu), this environment need not be the job's, whatever its torch:
    # a note that says why, never an error fix would act on
    why = "not a CUDA build" if not fa2["facts"]["torch"].get("cuda") else "by name, --gpu"
    assert ad505["status"] == "info" and why in ad505["message"], ad505
    human = cli("check", "--gpu", "h100", "--no-sample", "-c", str(cfg), env=env).stdout
    assert "assumed (--gpu h100)" in human and "AD509" not in human
    assert "· " + str(cfg) + ": axolotl (only axolotl writes sequence_len" in human and "not understood: flash_optimum" in human


def test_check_gpu_usage_errors_and_the_list():
    listing = cli("check", "--gpu", "list")
    assert listing.returncode == 0 and "Tesla T4" in listing.stdout and "sm75" in listing.stdout and "(--gpu h100)" in listing.stdout
    for args, words in ((["--gpu", "t9"], "did you mean Tesla T4"), (["--capability", "sm75"], "expected a compute capability"),
                        (["--gpu", "t4", "--from-report", str(FACTS / "t4.json")], "keeps the GPU it was recorded on"),
                        (["--gpu", "t4", "--capability", "7.5"], "not both")):
        proc = cli("check", *args)
        assert proc.returncode == 2 and words in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


@pytest.mark.parametrize("content, needle", [
    (b"[training]\nmixed_precision_param = \n", "TOML syntax error: Invalid value at line 2, column 25: mixed_precision_param ="),
    (b"a = " + b"[" * 100_000 + b"]" * 100_000 + b"\n", "nested deeper than 64 levels"),
    (bytes(range(256)) * 40, "a binary file, not a text config"),
    (b"\xff\xfe precision: bf16\n", "not a text config: a binary file, or not UTF-8 text"),
    (b"", "the file is empty"),
    (b"\n  \n", "the file is empty"),
])
def test_a_hostile_toml_is_one_finding_and_the_rest_of_the_report(tmp_path, content, needle):
    cfg = tmp_path / "train.toml"
    cfg.write_bytes(content)
    other = REAL / "axolotl" / "config.yml"
    proc = cli("check", "--from-report", str(FACTS / "t4.json"), "-c", str(cfg), "-c", str(other), "--json")
    assert proc.returncode == 1, proc.stderr  # the other config's error, not the unread file
    results = {r["rule"]: r for r in json.loads(proc.stdout)["results"]}
    assert results["AD512"]["status"] == "info" and needle in results["AD512"]["message"], results["AD512"]
    assert results["AD509"]["status"] == "error"  # the other config is judged all the same
    alone = cli("check", "--from-report", str(FACTS / "t4.json"), "-c", str(cfg), "--json")
    without = cli("check", "--from-report", str(FACTS / "t4.json"), "--json")
    assert alone.returncode == without.returncode  # the unread file adds nothing to the exit code


def test_a_folder_is_one_finding(tmp_path):
    proc = cli("check", "--from-report", str(FACTS / "t4.json"), "-c", str(tmp_path), "--json")
    results = {r["rule"]: r for r in json.loads(proc.stdout)["results"]}
    assert results["AD512"]["status"] == "info" and "a folder, not a file" in results["AD512"]["message"]


def test_an_unknown_config_is_said_out_loud_with_the_keys_it_did_not_understand(tmp_path):
    cfg = tmp_path / "mytrainer.yaml"
    cfg.write_text("# our in-house trainer\nrun_name: exp1\nuse_bf16_autocast: true\nattention_kernel: flash\n")
    proc = cli("check", "--from-report", str(FACTS / "t4.json"), "-c", str(cfg), "--json")
    result = next(r for r in json.loads(proc.stdout)["results"] if r["rule"] == "AD513")
    assert result["status"] == "warning"
    assert "not recognised" in result["message"] and "use_bf16_autocast, attention_kernel" in result["message"]


def test_accelerate_reads_the_launchers_environment_variable():
    cfg = REAL / "accelerate" / "multi_gpu.yaml"
    assert probe_config(str(cfg), {}).plan["compute_dtype"].value == "bfloat16"
    overridden = probe_config(str(cfg), {"ACCELERATE_MIXED_PRECISION": "fp16"}).plan["compute_dtype"]
    assert (overridden.value, overridden.source, overridden.key) == ("float16", "env", "ACCELERATE_MIXED_PRECISION")


def yaml_without(path: Path, key: str) -> Path:
    import tempfile

    lines = [line for line in path.read_text().splitlines(True) if not line.startswith(f"{key}:")]
    out = Path(tempfile.mkdtemp()) / path.name
    out.write_text("".join(lines))
    return out


def test_defaults_applied_where_the_key_is_absent():
    # a handbook recipe (use_flash_attention_2, only TRL's) without its bf16 key: TRL's bf16 = not fp16
    recipe = yaml_without(REAL / "trl" / "handbook_config.yaml", "bf16")
    trl = probe_config(str(recipe), {}).plan["compute_dtype"]
    assert (trl.value, trl.source) == ("bfloat16", "default") and "not fp16" in trl.note
    # the same keys without anything only TRL writes: no TRL default assumed
    example = probe_config(str(REAL / "trl" / "example_config.yaml"), {})
    assert example.kind == "unknown" and "suggest TRL, but nothing only TRL writes" in example.why and not example.plan
    titan = probe_config(str(REAL / "torchtitan" / "llama3_8b.toml"), {}).plan["compute_dtype"]
    assert (titan.value, titan.source) == ("bfloat16", "default") and "mixed_precision_param" in titan.note
    axolotl = probe_config(str(REAL / "axolotl" / "3b-fp8-fsdp2.yaml"), {}).plan
    assert axolotl["compute_dtype"].raw == "auto" and axolotl["tf32"].value == "auto" and axolotl["fp8"].requires == "9.0"


def test_fix_writes_the_remedy_in_the_frameworks_keys_and_keeps_comments(tmp_path):
    import shutil

    state = tmp_path / "state"
    axolotl = tmp_path / "config.yml"
    shutil.copyfile(REAL / "axolotl" / "lora-mps.yml", axolotl)
    titan = tmp_path / "llama3_8b.toml"
    shutil.copyfile(REAL / "torchtitan" / "llama3_8b.toml", titan)
    before_titan = titan.read_bytes()
    comments = [line for line in axolotl.read_text().splitlines() if line.lstrip().startswith("#")]
    proc = cli("fix", "--from-report", str(FACTS / "t4.json"), "-c", str(axolotl), "-c", str(titan), "--yes", "--json",
               env={"ATTN_DOCTOR_STATE_DIR": str(state)})
    doc = json.loads(proc.stdout)
    statuses = {(a["rule"], tuple(a["files"])): a["status"] for a in doc["actions"]}
    assert statuses[("AD509", (str(axolotl),))] == "verified" and statuses[("AD501", (str(axolotl), str(titan)))] == "verified"
    text = axolotl.read_text()
    assert "\nbf16: false" in text and "\nfp16: true" in text and "\ntf32: false" in text
    assert [line for line in text.splitlines() if line.lstrip().startswith("#")] == comments
    # TOML: edited in place; the one new line goes into [training], after its last key; the rest as it was
    import difflib

    before_lines, after_lines = before_titan.decode().splitlines(True), titan.read_text().splitlines(True)
    ops = [op for op in difflib.SequenceMatcher(None, before_lines, after_lines).get_opcodes() if op[0] != "equal"]
    assert [(tag, after_lines[j1:j2]) for tag, _i1, _i2, j1, j2 in ops] == [("insert", ['mixed_precision_param = "float32"\n'])]
    section = max(i for i, line in enumerate(after_lines[: ops[0][3]]) if line.startswith("["))
    assert after_lines[section].strip() == "[training]"


@pytest.mark.parametrize("trl, refused", [("0.27.0", True), ("1.9.0", True), ("0.26.2", False), (None, False)])
def test_a_handbook_recipe_is_refused_by_the_trl_that_dropped_torch_dtype(trl, refused):
    from attn_doctor.facts import Package

    facts = load_facts_file(FACTS / "h100.json")
    if trl:
        facts.packages["trl"] = Package(version=trl)
    facts.configs = [probe_config(str(REAL / "trl" / "handbook_config.yaml"), {})]
    result = next(r for r in diagnose(facts, load_recipes(None)).results if r.rule == "AD511")
    assert (result.status == "error") == refused, result
    if refused:
        assert "Unknown arguments from config file: ['torch_dtype']" in result.message
        assert "rename `torch_dtype:` to `dtype:`" in result.remedies[0].summary


def test_the_python_api_judges_for_an_assumed_gpu_too():
    import attn_doctor
    from attn_doctor.errors import UsageError

    report = attn_doctor.check(config=str(REAL / "torchtune" / "8B_full.yaml"), from_report=None, quick=True, gpu="v100")
    assert report.facts.assumed_gpu.capability == "7.0" and report.facts.configs[0].kind == "torchtune"
    ad501 = next(r for r in report.results if r.rule == "AD501")
    assert ad501.status == "warning" and "dtype: fp32" in ad501.remedies[0].summary
    with pytest.raises(UsageError, match="gpu=t9: not a GPU"):
        attn_doctor.check(quick=True, gpu="t9")


def test_a_nemo_megatron_gpt_yaml_plans_megatron_amp_o2_and_use_flash_attention(tmp_path):
    """NeMo 1.x's megatron_gpt_config.yaml is NeMo's, not Lightning's: O2 (bf16 weights, fp32 main params in
    the optimizer) and the legacy model's use_flash_attention are in its plan, each with its key."""
    text = (REAL / "nemo" / "megatron_gpt_config.yaml").read_text()
    text = text.replace("  mcore_gpt: True", "  mcore_gpt: False").replace(
        "  use_flash_attention: False", "  use_flash_attention: True")
    cfg = tmp_path / "megatron_gpt_config.yaml"
    cfg.write_text(text)
    config = probe_config(str(cfg), {})
    assert config.kind == "nemo"
    assert config.plan["param_dtype"].key == "model.megatron_amp_O2" and config.plan["param_dtype"].value == "float32"
    assert config.plan["compute_dtype"].value == "bfloat16"
    assert config.plan["attention"].key == "model.use_flash_attention" and config.plan["attention"].value == "flash_attention_2"


def test_gpt_neox_precision_that_conflicts_with_an_enabled_deepspeed_block_is_said_with_neoxs_words(tmp_path):
    # arguments.py asserts it when NeoX reads the merged config: "DeepSpeed fp16 field was set but precision conflicts"
    path = tmp_path / "neox.yml"
    path.write_text('{\n  "pipe_parallel_size": 1,\n  "precision": "bfloat16",\n  "fp16": {"enabled": true, "loss_scale": 0},\n}\n')
    config = probe_config(str(path), {})
    assert config.kind == "gpt-neox" and config.plan["compute_dtype"].value == "bfloat16"
    assert config.conflicts == {"precision, fp16.enabled": "DeepSpeed fp16 field was set but precision conflicts"}
    facts = load_facts_file(FACTS / "a100.json")
    facts.configs = [config]
    found = [r for r in diagnose(facts, load_recipes(None)).results if r.rule == "AD504" and r.status == "error"]
    assert found and "DeepSpeed fp16 field was set but precision conflicts" in found[0].message, found
    # a model file of the run, without precision keys: nothing assumed, no precision edit offered; the
    # attention it names has its edit (NeoX's own "global" attention)
    model = tmp_path / "model.yml"
    model.write_text('{"pipe_parallel_size": 1, "attention_config": [[["flash"], 2]]}\n')
    config = probe_config(str(model), {})
    assert "compute_dtype" not in config.plan and config.plan["attention"].value == "flash_attention_2"
    assert config.edits == {"attention=sdpa": {"attention_config": [[["global"], 2]]}}


def test_gpt_neox_keys_written_with_hyphens_are_read_as_neox_reads_them(tmp_path):
    """NeoX reads a top-level key's hyphens as underscores, and its own configs (Pythia's) write
    them so: such a file is NeoX's, its flash attention in the plan, and said as it is written."""
    real = Path(__file__).parent / "fixtures" / "configs" / "harvest" / "EleutherAI__pythia" / "models__1B__pythia-1b.yml"
    config = probe_config(str(real), {})
    assert config.kind == "gpt-neox" and "pipe-parallel-size" in config.why
    assert config.plan["attention"].value == "flash_attention_2" and config.plan["attention"].key == "attention-config"
    assert "attention-config" not in config.unread and "attention_config" not in config.unread
    assert config.plan["compute_dtype"].value == "float16"
    mixed = tmp_path / "neox.yml"
    mixed.write_text('{\n  "pipe-parallel-size": 1,\n  "attention_config": [[["flash"], 2]],\n  "precision": "bfloat16",\n'
                     '  "bf16": {"enabled": true},\n  "seq-length": 2048,\n}\n')
    config = probe_config(str(mixed), {})
    assert config.kind == "gpt-neox" and config.plan["attention"].key == "attention_config"
    assert config.plan["compute_dtype"].value == "bfloat16" and config.edits["precision=fp16"] == {"precision": "fp16", "bf16.enabled": False}
