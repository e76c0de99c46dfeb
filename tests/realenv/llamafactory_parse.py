"""Read a training YAML the way the installed LLaMA-Factory does, in that environment's Python.

Usage: python llamafactory_parse.py CONFIG.yaml OUT.json

Runs the release's own code: `llamafactory-cli train CONFIG.yaml` parses with
`llamafactory.hparams.get_train_args()` (HfArgumentParser over the release's dataclasses, its
checks, its YAML loader), then hands `flash_attn` to the release's own
`configure_attn_implementation`, which raises on a value it does not know. Only the package's
top-level `__init__` is skipped: it imports the CLI, the web UI and gradio, none of which the
parser needs. No GPU, no model download (a default LlamaConfig stands in for the model's config).
Writes {"ok": ..., "stage": ..., "error": ..., "warnings": [what it logged], the parsed values} to OUT.json.
"""

import importlib.util
import inspect
import json
import os
import sys
import types


ROOTS = {}


def bare_package(name):
    """Make `name` importable as a package without running its __init__ (its submodules import)."""
    import importlib.machinery

    top = name.split(".")[0]
    if top not in ROOTS:
        ROOTS[top] = os.path.dirname(importlib.util.find_spec(top).origin)
    path = os.path.join(ROOTS[top], *name.split(".")[1:])
    if not os.path.isdir(path):
        return
    module = types.ModuleType(name)
    module.__path__ = [path]
    module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
    module.__spec__.submodule_search_locations = [path]
    sys.modules[name] = module


def main(config, out_path):
    import importlib.metadata
    import logging

    out = {"llamafactory": importlib.metadata.version("llamafactory"), "ok": False, "stage": "import", "warnings": []}
    warning = logging.Logger.warning

    def keep(self, msg, *args, **kwargs):  # what the release logs as a warning (warning_rank0 included)
        out["warnings"].append(str(msg) % args if args else str(msg))
        return warning(self, msg, *args, **kwargs)

    logging.Logger.warning = keep
    try:
        bare_package("llamafactory")
        from llamafactory.hparams import parser

        out["stage"] = "get_train_args"
        sys.argv = ["llamafactory-cli", config]  # what `llamafactory-cli train CONFIG` leaves for the parser
        model_args, data_args, training_args, finetuning_args, _ = parser.get_train_args()
        value = model_args.flash_attn
        out.update(
            flash_attn=getattr(value, "value", value),
            flash_attn_type=type(value).__name__,
            fp16=training_args.fp16,
            bf16=training_args.bf16,
            pure_bf16=getattr(finetuning_args, "pure_bf16", None),
            compute_dtype=str(getattr(model_args, "compute_dtype", None)),
        )
        out["stage"] = "configure_attn_implementation"
        for name in ("llamafactory.model", "llamafactory.model.model_utils", "llamafactory.model.utils"):
            bare_package(name)
        try:
            from llamafactory.model.model_utils.attention import configure_attn_implementation
        except ImportError:  # 0.7.x
            from llamafactory.model.utils.attention import configure_attn_implementation
        from transformers import LlamaConfig

        config_obj = LlamaConfig()
        kwargs = {"is_trainable": True} if "is_trainable" in inspect.signature(configure_attn_implementation).parameters else {}
        configure_attn_implementation(config_obj, model_args, **kwargs)
        requested = config_obj.__dict__.get("_attn_implementation_internal", config_obj.__dict__.get("_attn_implementation"))
        out.update(ok=True, stage="done", attn_implementation=requested)
    except BaseException as exc:  # noqa: BLE001 - the release's refusal is the result
        out["error"] = "%s: %s" % (type(exc).__name__, str(exc).strip().splitlines()[0][:500] if str(exc).strip() else "")
    with open(out_path, "w") as fh:
        json.dump(out, fh)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
