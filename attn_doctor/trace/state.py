"""The tracer that is running now, if any (one per process). No torch import here: the stand-ins
and library wrappers look at it on every call and must stay importable on their own."""

ACTIVE = [None]


def active():
    return ACTIVE[0]
