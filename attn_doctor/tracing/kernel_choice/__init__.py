"""Which kernel an attention call gets and why not the fastest: torch asked on a GPU, else SDPA's
choice emulated from sdp_utils' checks as data (sdpa_select), the kernel recorded at each call
(kernels), the change that gives a faster one (fallbacks), what a mask is and where it comes from
(masks, mask_patterns), and the call timed against its fix (cost). May import numerics, calls and
the ground floor; never the tracer itself (it is handed in)."""
