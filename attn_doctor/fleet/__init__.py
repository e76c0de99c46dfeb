"""Fleet mode: one report for many ranks or nodes.

- ``digest``: what must agree between nodes (the fleet view) and its digest;
- ``aggregate``: group reports by digest, name the differences against the majority (pure);
- ``distributed``: ``check --distributed`` under torchrun / srun, gathered through torch.distributed's TCPStore;
- ``files``: ``attn-doctor fleet`` over per-node JSON reports.
"""
