"""The attention calls and ops the tracer stops at, in words every room shares: which functions are
attention calls and the dtype rules of each kernel (sinks), CUDA autocast's op policy (policy,
autocast), the op graph's nodes (nodes), and the source edits a finding proposes (patch).
Standard library and torch only; imports nothing else of the tracer but places and state."""
