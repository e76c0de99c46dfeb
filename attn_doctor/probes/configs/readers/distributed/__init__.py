"""Readers of the frameworks that own their training loop and its parallelism: accelerate, DeepSpeed,
torchtitan, torchtune, LitGPT, Lightning (LightningCLI, Hydra), nanotron, MosaicML llm-foundry / composer."""
