"""Whether a kernel computes the right numbers at a traced call: the call and its "massive
activation" twin run forward and backward through the kernel SDPA picks and through float64
(at_calls). Imports only the probes' files (probe_files) and the ground floor."""
