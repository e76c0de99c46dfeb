"""explain on words it was never taught: a known message in another case, wrapping and markup; a
requirement a text states, judged against the facts the text gives; families that read facts (an
allocation against the GPU, a torch API against the release that brought it); the known case a
text resembles when no family matches. Texts are real messages (their sources in tests/corpus)."""

from __future__ import annotations

import gzip
import io
import json
import sys
from pathlib import Path

import pytest

from attn_doctor.explaining import neighbours
from attn_doctor.explaining import scan as scan_mod
from attn_doctor.explaining.core import explain
from attn_doctor.rules.loader import default_recipes_dir, load_recipes
from attn_doctor.rules.signatures import normalise

ROOT = Path(__file__).resolve().parents[2]
RECIPES = load_recipes()


def _explain(text: str, **kw):
    return explain(io.BytesIO(text.encode("utf-8")), RECIPES, kind="text", **kw)


def _found(text: str, **kw) -> dict[str, str]:
    return {m.rule: m.likelihood for m in _explain(text, **kw).matches}


FA2 = "RuntimeError: FlashAttention only supports Ampere GPUs or newer."


@pytest.mark.parametrize("text", [
    FA2.lower(),
    FA2.upper(),
    "RuntimeError: FlashAttention only supports\nAmpere GPUs or newer.",  # wrapped at a word
    "RuntimeError: FlashAttention only supports Amp\nere GPUs or newer.",  # wrapped at a column
    "> RuntimeError: `FlashAttention` only supports **Ampere GPUs** or newer.",  # markdown
    "RuntimeError：FlashAttention only supports  Ampere GPUs or newer.",  # full-width colon, two spaces
])
def test_a_known_message_in_another_case_wrapping_or_markup_is_itself(text):
    assert "AD103" in _found(text)


def test_the_gpu_named_elsewhere_in_a_lower_case_log_settles_the_cause():
    found = _found("loading checkpoint on tesla v100-sxm2-32gb\nruntimeerror: flashattention only supports ampere gpus or newer.")
    assert found["AD103"] == "confirmed" and found.get("AD104") == "unlikely"


@pytest.mark.parametrize("text, likelihood", [
    # an application's own fp8 floor, stated with the GPU's capability (ComfyUI-QwenVL's wording)
    ("ValueError: FP8 requires compute capability 8.9 or higher, but your GPU has compute capability 8.6", "confirmed"),
    ("ValueError: FP8 requires compute capability 8.9 or higher, but your GPU has compute capability 9.0", "unlikely"),
    # the floor alone, the GPU named elsewhere in the log
    ("Device: NVIDIA GeForce RTX 3090\nRuntimeError: fp8 needs compute capability 8.9", "confirmed"),
    ("Device: NVIDIA H100 80GB HBM3\nRuntimeError: fp8 needs compute capability 8.9", "unlikely"),
])
def test_a_stated_capability_floor_is_judged_against_the_gpu_the_text_names(text, likelihood):
    assert _found(text)["AD111"] == likelihood


def test_a_floor_no_family_knows_falls_to_the_generic_reading_and_the_gpu_decides():
    text = "torch.cuda: NVIDIA GeForce GTX 1080 Ti\nAssertionError: This kernel requires sm_80 or newer"
    report = _explain(text)
    m = next(m for m in report.matches if m.rule in ("AD110", "AD317"))
    assert m.likelihood == "confirmed" and "sm61" in m.likelihood_reason


@pytest.mark.parametrize("text, likelihood", [
    ("AssertionError: Input tensors must be in dtype of torch.float16 or torch.bfloat16", "possible"),
    ("ValueError: q must be float16 or bfloat16, got torch.float32", "confirmed"),
    ("ValueError: q must be float16 or bfloat16, got torch.float16", "unlikely"),
])
def test_a_kernels_stated_dtype_list_is_judged_against_the_dtype_it_got(text, likelihood):
    assert _found(text)["AD604"] == likelihood


def test_a_torch_api_is_judged_against_the_release_that_brought_it():
    old = _explain("torch 2.1.2\nModuleNotFoundError: No module named 'torch.nn.attention'")
    m = next(m for m in old.matches if m.rule == "AD413")
    assert m.likelihood == "confirmed" and "torch 2.3" in m.message
    new = _found("torch 2.4.0\nModuleNotFoundError: No module named 'torch.nn.attention'")
    assert new["AD413"] == "possible"
    gqa = _explain("TypeError: scaled_dot_product_attention() got an unexpected keyword argument 'enable_gqa'")
    assert gqa.matches[0].rule == "AD413" and "2.5" in gqa.matches[0].message


def test_an_optional_attention_library_not_installed_says_how_to_install_it():
    report = _explain("!!! Exception during processing !!! No module named 'spas_sage_attn'")
    m = report.matches[0]
    assert m.rule == "AD353" and "SpargeAttn" in (m.message or "")
    # a serving engine's notice that it falls back is no failure
    assert _found("flashinfer not found, use triton for linux") == {}


def test_a_library_whose_import_failed_quietly_is_read_from_the_frame_that_called_it():
    text = ('File "/venv/lib/python3.12/site-packages/vllm/attention/backends/flashinfer.py", line 199, in _get_prefill_wrapper\n'
            "    self._prefill_wrapper = BatchPrefillWithPagedKVCacheWrapper(\n"
            "TypeError: 'NoneType' object is not callable\n")
    assert _found(text) == {"AD353": "possible"}
    assert _found("TypeError: 'NoneType' object is not callable") == {}


OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {alloc}. GPU 0 has a total capacity of {cap} of which 0 bytes is free."


def test_an_allocation_as_large_as_the_gpu_is_read_for_its_facts():
    # larger than the GPU, nothing names attention: a note, no alarm
    alone = _explain(OOM.format(alloc="400.00 GiB", cap="44.52 GiB"))
    assert [(m.rule, m.severity) for m in alone.matches] == [("AD280", "info")] and alone.exit_code == 0
    # a quarter of the GPU, with an attention frame above it: the matrix
    framed = _explain('  File "/app/models/attention.py", line 80, in forward\n    attn = torch.baddbmm(q, k, v)\n'
                      + OOM.format(alloc="10.25 GiB", cap="23.99 GiB"))
    assert framed.matches[0].rule == "AD280" and framed.matches[0].severity == "error" and framed.exit_code == 1
    assert "0.4x" in framed.matches[0].message
    # a small allocation is a budget, whatever the frames say
    assert _found('  File "/app/attention.py", line 80, in forward\n' + OOM.format(alloc="16.00 MiB", cap="7.79 GiB")) == {}


def test_a_guard_reads_the_frames_above_its_message_across_chunk_boundaries(monkeypatch):
    text = ('  File "/app/attention.py", line 80, in forward\n' + "x = 1\n" * 5 + OOM.format(alloc="10.25 GiB", cap="23.99 GiB") + "\n")
    for chunk in (48, 200, 4096):
        monkeypatch.setattr(scan_mod, "CHUNK", chunk)
        report = explain(io.BytesIO(text.encode()), RECIPES)
        assert [(m.rule, m.severity) for m in report.matches] == [("AD280", "error")], chunk
        assert report.matches[0].evidence[0].line == 7 and report.input.lines == 7


@pytest.mark.parametrize("text, expected", [
    ("/opt/conda/lib/python3.11/site-packages/diffusers/image_processor.py:147: RuntimeWarning: invalid value encountered in cast\n"
     '  images = (images * 255).round().astype("uint8")', {"AD660": "possible"}),
    ("--precision 16\nEpoch 0/1 | Batch 100/15582 | Train Loss nan | Learning Rate 2e-08", {"AD660": "possible"}),
    ("[session 1][epoch  1][iter  100/2892] loss: nan, lr: 1.00e-04", {}),  # no float16 in sight
    ("WARNING:root:NaN or Inf found in input tensor.", {}),
])
def test_fp16_overflow_is_named_only_where_the_run_uses_float16(text, expected):
    assert _found(text) == expected


def test_vllms_per_backend_reasons_name_the_reason_the_candidates_share():
    text = ("ValueError: No valid attention backend found for cuda with AttentionSelectorConfig(head_size=576, use_sparse=True). "
            "Reasons: {FLASH_ATTN_MLA: [sparse not supported, compute capability not supported], "
            "TRITON_MLA: [sparse not supported], FLASHMLA_SPARSE: [compute capability not supported]}.")
    assert _explain(text).matches[0].rule == "AD317"


def test_an_autograd_wrapper_out_of_step_with_its_library_is_api_skew():
    assert _found("AttributeError: 'xFuserRingFlashAttnFuncBackward' object has no attribute 'softcap'") == {"AD311": "confirmed"}
    text = "[rank1]:     qkv, indices, cu_q_lens, max_s = unpad_input(qkv, key_padding_mask)\n[rank1]: ValueError: too many values to unpack (expected 4)"
    assert _found(text) == {"AD311": "confirmed"}
    assert _found("ValueError: too many values to unpack (expected 4)") == {}  # no attention call in sight


# -- the known case a text resembles ----------------------------------------------------------

INDEX = neighbours.Index.load(default_recipes_dir() / neighbours.INDEX_NAME)
# the rules whose families read facts (explain never offers them on words alone)
JUDGED = frozenset(r.id for r in RECIPES.rules for sig in r.signatures if not isinstance(sig, str) and sig.guard)


def test_the_shipped_index_is_the_corpus():
    """Regenerate with: python benchmarks/calibrate_neighbours.py --build"""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from score_explain import load_corpus

    cases, _ = load_corpus()
    built = neighbours.build(cases, normalise)
    with gzip.open(default_recipes_dir() / neighbours.INDEX_NAME, "rt", encoding="utf-8") as f:
        shipped = json.load(f)
    assert shipped == json.loads(json.dumps(built)), "recipes/known_cases.json.gz is stale: python benchmarks/calibrate_neighbours.py --build"


def test_a_reworded_known_failure_resembles_its_case_and_an_unrelated_one_nothing():
    # a real case's line, reworded as another report of it would be: paths, numbers, case
    case = next(e for e in INDEX.entries if e["id"] == "vllm-9922")
    line = case["lines"][-1].replace("Quadro RTX 4000", "Tesla T4").upper()
    near = INDEX.nearest([line])
    assert near is not None and set(near.rules) & set(case["rules"])
    assert INDEX.nearest(["OSError: Can't load tokenizer for 'my-org/my-model'. If you were trying to load it from the hub"]) is None


def test_a_line_that_states_other_dtypes_does_not_resemble_a_dtype_case():
    # a float32 input into a bf16 layer (cogkit-32) against a 4-bit weight's packed bytes reaching a
    # plain matmul (unsloth-3337): the same words, other dtypes, another failure
    case = next(e for e in INDEX.entries if e["id"] == "cogkit-32")
    assert neighbours.dtypes(case["lines"][-1]) == {"float32", "bfloat16"}
    assert neighbours.dtypes("expected scalar type Half but found Float") == {"float16", "float32"}
    reworded = "RuntimeError: mat1 and mat2 must have the same dtype, but got float and bfloat16"
    assert INDEX.nearest([reworded], exclude=frozenset(), judged=JUDGED) is not None
    assert INDEX.nearest(["RuntimeError: self and mat2 must have the same dtype, but got BFloat16 and Byte"],
                         judged=JUDGED) is None


def test_a_missing_library_resembles_only_cases_of_that_library():
    # the library's name is what the line is about: Python's own libpython is not torch's libc10
    assert "libpython3.7m.so" in neighbours.terms("ImportError: libpython3.7m.so.1.0: cannot open shared object file")
    assert INDEX.nearest(["ImportError: libpython3.7m.so.1.0: cannot open shared object file: No such file or directory"],
                         judged=JUDGED) is None


def test_a_line_quoting_other_names_does_not_resemble_a_case_that_shares_one_of_them():
    # Python's comparison TypeError names the user's types: 'str' and 'float' are not 'tuple' and 'float'
    known = "typeerror: '<' not supported between instances of 'tuple' and 'float'"
    assert neighbours.same_names(neighbours.quoted(known), neighbours.quoted(known.replace("tuple", "TUPLE")))
    assert not neighbours.same_names(neighbours.quoted("TypeError: '<' not supported between instances of 'str' and 'float'"),
                                     neighbours.quoted(known))
    assert INDEX.nearest(["TypeError: '<' not supported between instances of 'str' and 'float'"], judged=JUDGED) is None
    # one op's two names share their parts: a module and its compiled part are still alike, and a
    # module's other attribute is the same module's
    assert neighbours.same_names(neighbours.quoted("No module named 'selective_scan_cuda'"),
                                 neighbours.quoted("cannot import name 'selective_scan_fn'"))
    assert neighbours.same_names(neighbours.quoted("AttributeError: module 'triton' has no attribute 'ops'"),
                                 neighbours.quoted("AttributeError: module 'triton' has no attribute 'Function'"))


def test_the_search_raises_no_alarm_on_the_corpus_negatives_leave_one_out():
    """The calibration's claim (benchmarks/calibrate_neighbours.py): no negative or harmless text of
    the corpus resembles a failure once its own entry is left out."""
    for entry in INDEX.entries:
        if entry["rules"]:
            continue
        assert INDEX.nearest(entry["lines"], exclude=frozenset({entry["id"]}), judged=JUDGED) is None, entry["id"]


def test_explain_offers_the_resembled_cause_as_possible_with_its_source():
    text = "ValueError: XFormers does not support attention logits soft capping for GPU Quadro RTX 4000"
    # a recipe set without the family that reads this message: the text still finds its case
    recipes = load_recipes()
    recipes.get("AD281").signatures = []
    report = explain(io.BytesIO(text.encode()), recipes, kind="text")
    m = report.matches[0]
    assert m.resembles is not None and m.resembles.source == "vllm-project/vllm#9922"
    assert m.likelihood == "possible" and "resembles" in m.likelihood_reason and report.exit_code == 1
    assert m.rule in ("AD103", "AD281")
    assert RECIPES.get("AD281").signatures  # the shared recipes were not touched
