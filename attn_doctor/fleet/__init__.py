"""Fleet mode: one report for many ranks or nodes.

- ``digest``: what must agree between nodes (the fleet view) and its digest; ``view``: reports
  read at the decoder's speed (typed structs generated from the report's, bounded), one kept per group;
- ``aggregate``: group reports by digest, name the differences against the majority (pure);
- ``distributed`` and ``group``: ``check --distributed`` under torchrun / srun (each rank's check
  through core.run_check), gathered through torch.distributed's TCPStore;
- ``files``: ``attn-doctor fleet`` over per-node JSON reports; ``rayfleet``: one check per Ray node.

May import (the layering contract, pyproject.toml): its layer's siblings (api, results, fix,
explain, integrations), the pipeline (core, options, gather), rules, report, probes and the
bottom layer. Never render or the CLI.
"""
