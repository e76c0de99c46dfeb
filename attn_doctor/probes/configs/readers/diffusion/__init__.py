"""Readers of the diffusion trainers: kohya sd-scripts, musubi-tuner, OneTrainer, SimpleTuner (their
TOML and JSON: mixed precision, full bf16, weight dtypes that are storage, attention switches)."""
