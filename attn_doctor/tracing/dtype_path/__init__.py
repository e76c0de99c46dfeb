"""The dtype path: the tracer that runs one forward (and backward) pass under a TorchFunctionMode,
stops at every attention call and keeps the op graph (tracer), attention written out as matmul /
softmax / matmul (inline), the walk from a wide input back to the op that promoted it (provenance)
and to the line that chose a dtype held in a variable (decided). May import calls, kernel_choice
(to name each call's kernel), numerics and the ground floor; never runs, report or standins."""
