"""Readers of the Megatron family: NVIDIA NeMo (1.x Megatron YAML and its Lightning trainer), NeMo-RL,
Megatron-Bridge, GPT-NeoX; _megatron.py (one level up) holds what they share with verl's Megatron back end."""
