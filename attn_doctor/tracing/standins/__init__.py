"""Stand-ins for attention libraries that do not import here, and wrappers of those that do: one
module per library (fa2, fa3, fa4, xformers, sage, hub, with bert_padding for flash_attn's), each
giving its library's checks and messages then computing the attention with SDPA, its calls' specs
with its rules, and one ``library.Library`` record; registry lists the records (LIBRARIES) and puts
the stand-ins in sys.modules before the model is imported, wrappers wraps the real libraries'
functions. May import calls and the ground floor only."""
