"""Readers of the trainers built on transformers' Trainer and model loading: transformers itself, TRL,
axolotl, LLaMA-Factory, ms-swift, open-instruct, OpenRLHF, Oumi, h2o-llmstudio, verl. Each reads its
framework's keys with the defaults of its own code; _hf.py (one level up) holds what they share."""
