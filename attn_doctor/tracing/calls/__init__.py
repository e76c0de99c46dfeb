"""The attention calls and ops the tracer stops at, in words every room shares: which functions are
attention calls and the dtype rules of torch's kernels and flash-attn 2's (sinks; the other
libraries' rules travel on their calls' specs, from standins/), CUDA autocast's op policy (policy,
autocast), the op graph's nodes (nodes), and the source edits a finding proposes (patch).
Standard library and torch only; imports nothing else of the tracer but places and state."""
