"""The entry points: the public ``trace()`` (api), one run of a model under the tracer (run) and the
tensors it takes and returns (outputs), the
factories it builds a model from (factory), transformers models from a config (hf_models), the
trace in another interpreter (launch, child), the paths a model takes with and without a stand-in
(routes), the trace modes (mode), check's sample models (samples) and the contexts every forward
pass of a model enters off the GPU (gpu_stand_in). The top room: it may import
every other; nothing below imports it."""
