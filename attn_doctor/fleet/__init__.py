"""Fleet mode: one report for many ranks or nodes.

- ``digest``: what must agree between nodes (the fleet view) and its digest; ``view``: reports
  read at the decoder's speed (typed structs generated from the report's, bounded), one kept per group;
- ``aggregate``: group reports by digest, name the differences against the majority (pure);
- ``distributed`` and ``group``: ``check --distributed`` under torchrun / srun (each rank's check
  through core.run_check), gathered through torch.distributed's TCPStore;
- ``files``: ``attn-doctor fleet`` over per-node JSON reports; ``rayfleet``: one check per Ray node.

May import (the layering contract, pyproject.toml): the pipeline (core, options, gather), the
engine, rules, report, probes and the ground floor. Not fix or explaining (its independent
siblings), nor the API above it (results holds a FleetReport), render or the CLI.
"""
