"""The tracer that is running now, if any (one per process). No torch import here: the stand-ins
and library wrappers look at it on every call and must stay importable on their own."""

ACTIVE = [None]


def active():
    return ACTIVE[0]


# Where the trace says how far it got ("importing torch", "building the model", "tracing: N ops"):
# the CLI's spinner in this process, or a line on the child's stderr that the doctor reads
# (attn_doctor/tracing/runs/launch.py); None: nobody watches, nothing is said.
PROGRESS = [None]
PROGRESS_PREFIX = "\x1eattn-doctor-progress: "


def say(message):
    hook = PROGRESS[0]
    if hook is not None:
        hook(message)

# True while a torch.compile'd flex_attention (or a wrapper of it) is being called: the trace runs
# it eagerly, but on the GPU it is the fused kernel (attn_doctor/tracing/kernel_choice/kernels.py).
FLEX_COMPILED = [False]

# True while the doctor runs the model for its own purposes (trying the inputs it made): the float64
# shadow's measurement of the model's construction leaves those runs out.
OWN_RUN = [False]


class own_run(object):
    """A context manager: the doctor's own run of the model (OWN_RUN)."""

    def __enter__(self):
        self.saved = OWN_RUN[0]
        OWN_RUN[0] = True

    def __exit__(self, *exc):
        OWN_RUN[0] = self.saved
        return False
