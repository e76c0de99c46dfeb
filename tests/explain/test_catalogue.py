"""The message catalogue (recipes/catalogue.jsonl.gz, read from the libraries' sources): a line no
signature reads that is one of the stack's own messages is explained by the family its check states,
with the site that raises it; under the wrappers users paste it in, cut short, or only on a
traceback's raise line; a check with no message is read from its condition. Real explain, the
shipped catalogue, and the CLI as a subprocess."""

from __future__ import annotations

import gzip
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from attn_doctor.explaining import catalogue as cat
from attn_doctor.explaining.core import explain
from attn_doctor.rules.loader import load_recipes

RECIPES = load_recipes()
ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "recipes" / cat.CATALOGUE_NAME


def _first(text: str, recipes=RECIPES):
    report = explain(io.BytesIO(text.encode("utf-8")), recipes, kind="stdin")
    return next((m for m in report.matches if not m.harmless), None), report


def test_every_entry_names_a_rule_that_explains_it():
    rows = [json.loads(line) for line in gzip.open(SHIPPED, "rt", encoding="utf-8")]
    assert len(rows) > 5000
    for row in rows:
        rule = RECIPES.get(row["rule"])
        assert rule is not None, row
        assert rule.catalogue or rule.signatures, row["rule"]
        assert rule.cause, row["rule"]  # explain names a root-cause class for each
        assert row["at"] and all(len(at.split(" ", 2)) == 3 for at in row["at"]), row
        assert not row["family"].startswith("out:") and row["family"] != "unclassified", row


@pytest.mark.parametrize("wrap", [
    "RuntimeError: {}",
    "[rank3]: RuntimeError: {}",
    "2026-11-27 10:00:00,123 - train - ERROR - RuntimeError: {}",
    "I get this:\n\n> `RuntimeError: {}`\n",
])
def test_a_kernel_check_is_named_with_the_site_that_raises_it(wrap):
    m, _ = _first(wrap.format("cu_seqlens_k must be on CUDA"))
    assert m is not None and m.rule == "AD256" and m.likelihood == "confirmed"
    assert m.site is not None and m.site.complete
    assert any("flash-attn" in at and "flash_api.cpp" in at for at in m.site.at)


def test_the_family_is_the_checks_not_the_words_of_one_dimension():
    # a shape that lists head_size among its dimensions is a shape constraint, not a head-dim limit
    m, _ = _first("RuntimeError: k must have shape (total_k, num_heads_k, head_size)")
    assert m.rule == "AD282" and m.cause == "kernel-arguments"
    assert "flash-attn" in m.message and "k must have shape" in m.message


def test_a_traceback_cut_at_the_raise_line_is_read_from_it_as_possible():
    text = ('Traceback (most recent call last):\n'
            '  File "/opt/venv/lib/python3.11/site-packages/xformers/ops/sp24.py", line 9, in f\n'
            "    raise ValueError(f'{name} must be contiguous')\n")
    m, _ = _first(text)
    assert m is not None and m.rule == "AD257" and m.likelihood == "possible"
    assert m.site.complete is False and "raise" in m.likelihood_reason


def test_a_line_cut_short_matches_on_its_leading_parts_as_possible():
    whole = ("RuntimeError: Tensor query_scale must have shape (batch_size, num_qo_heads, div_ceil(qo_len, CTA_Q) * "
             "(CTA_Q / WARP_Q))")
    m, _ = _first(whole)
    assert m is not None and m.likelihood == "confirmed"
    cut = whole[:92]  # past half of the message, inside a word
    m2, _ = _first(cut)
    assert m2 is not None and m2.rule == m.rule and m2.likelihood == "possible"


def test_a_line_cut_inside_a_value_matches_but_one_that_goes_on_in_other_words_does_not():
    # cut inside the first dtype's value (MSVC's "struct c10::BFloat16"), in typographic quotes
    m, _ = _first("“RuntimeError: Expected query, key, and value to have the same dtype, but got query.dtype: struct c10”")
    assert m is not None and m.rule == "AD601" and m.likelihood == "possible"
    assert "promotion-reaches-attention" in m.likelihood_reason and "rule:" not in m.likelihood_reason
    # a message that shares its first words with a catalogued one and then says something else
    m, _ = _first("ValueError: You can't train a model that has been loaded in 8-bit precision on multiple devices.")
    assert m is None, (m.rule, m.likelihood_reason)


@pytest.mark.parametrize("quote", ['"{}"', "\u201c{}\u201d", "\u300c{}\u300d"])
def test_a_message_quoted_inside_a_sentence_of_prose_is_read_from_the_quote(quote):
    line = ("\u5728\u4f7f\u7528PEFT\u5e93\u8fdb\u884cQLoRA\u5fae\u8c03\u65f6,\u4f1a\u9047\u5230"
            + quote.format("RuntimeError: expected mat1 and mat2 to have the same dtype")
            + "\u9519\u8bef\u3002\u8fd9\u4e2a\u95ee\u9898\u5728FP16\u7cbe\u5ea6\u4e0b\u4e0d\u4f1a\u51fa\u73b0\u3002")
    m, _ = _first(line)
    assert m is not None and m.rule == "AD651" and m.likelihood == "possible", m
    # a quoted path or a quoted name of the writer's is no message
    assert _first('  File "/opt/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1532, '
                  'in _wrapped_call_impl\n')[0] is None


def test_a_string_in_a_notebooks_numbered_source_lines_is_code_not_a_quoted_message():
    # IPython prints the lines around the one that ran: a message written there was not raised
    frame = ('   3604     logger.warning(\n'
             '   3605         "This model has some weights that should be kept in higher precision, you need to upgrade "\n'
             '   3606         "`accelerate` to properly deal with them (`pip install --upgrade accelerate`)."\n'
             '-> 3609     max_memory = get_balanced_memory(\n')
    # as an argument (kind "text"), every line is read, not only those with an error's words
    report = explain(io.BytesIO(frame.encode("utf-8")), RECIPES, kind="text")
    assert [m.rule for m in report.matches if not m.harmless] == []


@pytest.mark.parametrize("kind", ["text", "file"])
def test_the_lines_a_notebook_prints_around_the_one_that_ran_are_not_messages(kind):
    # IPython shows the raise next to the one that ran: only the marked line and the error ran
    frame = ('File d:\\venv\\lib\\site-packages\\unsloth_zoo\\device_type.py:46, in get_device_type()\n'
             '     52             return "xpu"\n'
             '     53     # Check torch.accelerator\n'
             '     54     raise NotImplementedError("Unsloth currently only works on NVIDIA, AMD and Intel GPUs.")\n'
             '     98         f"Unsloth: Please install unsloth_zoo via `pip install unsloth_zoo` then retry!"\n'
             '---> 46         raise NotImplementedError("The weather is fine today, said the kernel.")\n'
             '\n'
             'NotImplementedError: The weather is fine today, said the kernel.\n')
    report = explain(io.BytesIO(frame.encode("utf-8")), RECIPES, kind=kind)
    assert [m.rule for m in report.matches if not m.harmless] == []


def test_a_short_message_counts_only_as_the_whole_message_of_its_line():
    assert _first("RuntimeError: Unsupported dtype")[0].rule == "AD287"
    # the same words inside another sentence are not that message
    m, _ = _first('LayerNormKernelImpl" not implemented for \'Half\' and Unsupported dtype handling in my code\n')
    assert m is None or m.site is None




SHIPPED_CATALOGUE = cat.Catalogue.load(SHIPPED)


@pytest.mark.parametrize("line,read", [
    ("RuntimeError: Not compiled with CUDA support", True),
    ("2024-01-01 12:00:00 WARNING Not compiled with CUDA support", True),
    ("[rank0]: not compiled with CUDA support", True),
    # another writer's sentence that holds a short message's words: XGBoost's, a script's
    ("xgboost.core.XGBoostError: [10:21:12] ../src/gbm/gbm.cc:26: XGBoost version not compiled with GPU support.", False),
    ("AssertionError: PyTorch was not compiled with CUDA support", False),
    ("ValueError: my_lib not compiled with CUDA support, please reinstall", False),
])
def test_a_message_shorter_than_a_sentence_is_read_only_where_a_message_starts(line, read):
    hit = SHIPPED_CATALOGUE.match(line)
    assert (hit is not None) == read, hit and hit.entry
@pytest.mark.parametrize("text", [
    # a status prefix carries no cause of its own: the status text after it does
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "RuntimeError: CUDA error: device-side assert triggered",
    # a device-side assert of an indexing kernel: the user's index, not the stack
    "/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1236: indexSelectSmallIndex: block: [0,0,0], thread: [0,0,0] "
    "Assertion `srcIndex < srcSelectDimSize` failed.",
    # two types of one dtype on two devices; a packed 8-bit weight: no precision mismatch
    "RuntimeError: Input type (torch.cuda.HalfTensor) and weight type (torch.HalfTensor) should be the same",
    # the input on the CPU, the half weight on the GPU: the device differs first
    "RuntimeError: Input type (torch.FloatTensor) and weight type (torch.cuda.HalfTensor) should be the same "
    "or input should be a MKLDNN tensor and weight is a dense tensor",
    # torch's own spelling where no legacy name exists: float32 on MPS beside float32 on the CPU
    "RuntimeError: Input type (MPSFloatType) and weight type (torch.FloatTensor) should be the same",
    "RuntimeError: self and mat2 must have the same dtype, but got BFloat16 and Byte",
    # float against double: the user's data (numpy's float64), not the stack's precision
    "RuntimeError: expected scalar type Float but found Double",
    "RuntimeError: expected m1 and m2 to have the same dtype, but got: double != float",
    "RuntimeError: Input type (double) and bias type (float) should be the same",
    # torch's dispatch refusing a full-precision or integer dtype: the caller's dtype (a float mask
    # given to a bitwise op), not the stack's precision
    "RuntimeError: \"bitwise_and_cuda\" not implemented for 'Float'",
    # DeepSpeed's batch arithmetic (train batch = micro batch x accumulation x GPUs): the job's config
    "x3202c0s31b0n0: AssertionError: Micro batch size per gpu: 0 has to be greater than 0",
    # a library's "load error: " before the loader's own words: the words after it carry the cause,
    # and a binary missing for this platform is not a CUDA call that failed
    "[bitsandbytes.cextension|ERROR]bitsandbytes library load error: Configured ROCm binary not found at "
    "/home/u/env/lib/python3.12/site-packages/bitsandbytes/libbitsandbytes_rocm82.so",
    # a float result written into an integer tensor (an integer target given to a loss): torch casts
    # between floating dtypes freely, so half and bfloat16 never meet this check
    "RuntimeError: result type Float can't be cast to the desired output type Long",
])
def test_look_alikes_raise_no_finding(text):
    m, report = _first(text)
    assert m is None, (m.rule, m.likelihood_reason)
    assert report.exit_code == 0


def test_a_check_without_a_message_is_read_from_its_condition():
    m, _ = _first("RuntimeError: Expected q.is_cuda() to be true, but got false.  (Could this error message be improved?)")
    assert m.rule == "AD256" and m.likelihood == "possible" and "q.is_cuda()" in m.likelihood_reason
    m, _ = _first("TVMError: Check failed: (head_dim == 128) is false: The head dimension must be 128")
    assert m.rule == "AD603"
    # torch 1.0's AT_ASSERTM: an op's own float32-only check is its lack of a half kernel
    m, _ = _first("RuntimeError: image.type().scalarType() == torch::ScalarType::Float ASSERT FAILED at "
                  "roi_align/src/crop_and_resize_gpu.cpp:27")
    assert m.rule == "AD269" and m.likelihood == "possible"
    # the same check of another dtype is not read so
    m, _ = _first("RuntimeError: x.type().scalarType() == at::ScalarType::Long ASSERT FAILED at ops.cpp:9")
    assert m is None or m.rule != "AD269"


def test_msvc_and_unspaced_dtype_mismatches_are_the_autocast_rule():
    assert _first("!!! ERROR during execution: expected mat1 and mat2 to have the same dtype, but got: "
                  "struct c10::Half != struct c10::BFloat16")[0].rule == "AD651"
    assert _first("expected mat1 and mat2 to have the same dtype, but got: float!= c10::Half")[0].rule == "AD651"


def test_a_shorter_copy_of_a_judged_message_is_judged_with_it():
    # torch's "mat1 and mat2 must have the same dtype, but got {} and {}" with two dtypes of which
    # neither is a half type is the caller's data; flashinfer's shorter "mat1 and mat2 must have the
    # same dtype" inside it is the same message and gets the same verdict
    for data in ("Long and Float", "Double and Float"):
        m, report = _first(f"RuntimeError: mat1 and mat2 must have the same dtype, but got {data}")
        assert m is None and report.exit_code == 0, data
    assert _first("RuntimeError: mat1 and mat2 must have the same dtype, but got Half and Float")[0].rule == "AD651"
    assert _first("RuntimeError: mat1 and mat2 must have the same dtype")[0].rule == "AD651"


def test_a_missing_package_that_is_no_piece_of_the_stack_is_not_an_attention_library():
    # the catalogue marks these out: torchaudio's TorchCodec, a logger's SDK, a vector store's client
    for text in ("RuntimeError: TorchCodec is required for load_with_torchcodec. Please install torchcodec to use this function.",
                 "ImportError: SwanLabCallback requires swanlab to be installed. Run `pip install swanlab`."):
        m, _ = _first(text)
        assert m is None or m.rule != "AD353", text
    # an attention library's is
    m, _ = _first("ImportError: sageattention not installed, please install it with pip install sageattention")
    assert m is not None and m.rule == "AD353"


def test_torchs_general_ops_speak_of_precision_only_by_their_dtypes():
    # aten/src/ATen/native's index_put, read from torch's source: two dtypes of which one is a half
    # type is a precision mismatch; the same check of the caller's data is not
    m, _ = _first("RuntimeError: Index put requires the source and destination dtypes match, got Float for the "
                  "destination and BFloat16 for the source.")
    assert m is not None and m.rule == "AD651" and any("TensorAdvancedIndexing.cpp" in at for at in m.site.at)
    m, report = _first("RuntimeError: Index put requires the source and destination dtypes match, got Float for the "
                       "destination and Long for the source.")
    assert m is None and report.exit_code == 0
    # a general op's check of its own arguments (devices, shapes) is the model's code, not an attention kernel's
    for text in ("RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
                 "RuntimeError: weight should have at least three dimensions"):
        m, _ = _first(text)
        assert m is None or m.rule not in ("AD256", "AD282", "AD287"), text


def test_a_search_for_a_kernel_that_fits_is_not_a_package_missing():
    # "could not find a compatible kernel / a valid config" is a kernel without a path for the call
    m, _ = _first("RuntimeError: could not find valid hipblaslt solution")
    assert m is not None and m.rule == "AD284"
    m, _ = _first('RuntimeError: "Could not find a compatible FMHA forward kernel."')
    assert m is None or m.rule != "AD353"


def test_a_message_inside_a_python_repr_with_escaped_quotes_is_itself():
    m, _ = _first("requests.exceptions.HTTPError: {'message': '\"LayerNormKernelImpl\" not implemented for \\'Half\\''}")
    assert m is not None and m.rule == "AD266"


def test_markdown_escapes_of_a_stored_post_are_read_through_but_a_windows_paths_backslashes_are_kept():
    # a Reddit or GitHub post's source: CXXABI\_1.3.15, vllm/\_C.abi3.so
    m, _ = _first("ImportError: /home/u/miniconda3/bin/../lib/libstdc++.so.6: version \\`CXXABI\\_1.3.15' not found "
                  "(required by /home/u/vllm/vllm/\\_C.abi3.so)")
    assert m is not None and m.rule == "AD352"
    # every underscore escaped, the post's usual form
    m, _ = _first("ModuleNotFoundError: No module named 'flash\\_attn\\_2\\_cuda'")
    assert m is not None and m.rule == "AD302"
    # a Windows traceback's D:\\...\\xformers\\__init__.py is a path: xformers' own optional import stays a notice
    m, report = _first('WARNING  A matching Triton is not available, some optimizations will not be enabled\n'
                       'Traceback (most recent call last):\n'
                       '  File "D:\\AI\\venv\\Lib\\site-packages\\xformers\\__init__.py", line 57, in _is_triton_available\n'
                       '    import triton  # noqa\n'
                       "ModuleNotFoundError: No module named 'triton'")
    assert m is None and report.exit_code == 0


def test_a_library_word_is_not_a_library_name():
    # "Failed to load library libonnxruntime_providers_shared.so": onnxruntime's provider bridge, no torch extension
    m, _ = _first("FAIL : Failed to load library libonnxruntime_providers_shared.so with error: "
                  "libonnxruntime_providers_shared.so: cannot open shared object file: No such file or directory")
    assert m is None or m.rule != "AD312"


def test_complex_dtypes_are_not_a_precision_autocast_reconciles():
    # an STFT's complex output against a layer's weight: casting inside autocast is no remedy
    for pair in ("CUDAComplexHalfType) and weight type (CUDAComplexFloatType", "CUDAComplexHalfType) and weight type (CUDAFloatType",
                 "CUDAComplexFloatType) and weight type (CUDAComplexDoubleType"):
        assert _first(f"RuntimeError: Input type ({pair}) should be the same")[0] is None, pair
    assert _first("RuntimeError: expected scalar type Float but found ComplexHalf")[0] is None


def test_a_signature_that_names_the_message_wins_over_the_catalogue():
    m, _ = _first("RuntimeError: FlashAttention only supports Ampere GPUs or newer.")
    assert m.rule == "AD103" and m.site is None


@pytest.mark.parametrize("text", [
    "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 256.0",
    # warnings that say what the library does with what it was given, and go on
    "WARNING - The exllama kernel for GPTQ requires a float16 input activation, while torch.bfloat16 was passed. "
    "Casting to float16.",
    "UserWarning: Device does not support bfloat16. Will change to float16.",
    "WARNING: Using FP8 quantized models requires a GPU or XPU, we will default to dequantizing the model to bf16 "
    "since no GPU or XPU is available",
    "Casting fp32 inputs back to torch.bfloat16 for flash-attn compatibility.",
    # a library's warning whose subject is not the stack at all: it says what it found and goes on
    "Some weights of the model checkpoint at bert-large-uncased were not used when initializing BertModel: "
    "['cls.predictions.bias', 'cls.seq_relationship.weight']\n- This IS expected if you are initializing BertModel "
    "from the checkpoint of a model trained on another task or with another architecture.",
    # vLLM's own choices on a T4, one notice superseding two capability readings of the same line
    "WARNING 05-26 00:48:46 [config.py:2972] Casting torch.bfloat16 to torch.float16.\n"
    "WARNING 05-26 00:49:01 [arg_utils.py:1658] Compute Capability < 8.0 is not supported by the V1 Engine. "
    "Falling back to V0.",
])
def test_a_notice_of_a_library_is_labelled_harmless(text):
    report = explain(io.BytesIO(text.encode("utf-8") + b"\n"), RECIPES, kind="stdin")
    assert report.matches and all(m.harmless for m in report.matches) and report.exit_code == 0, \
        [(m.rule, m.harmless) for m in report.matches]


@pytest.mark.parametrize("kind", ["text", "stdin", "file"])
def test_a_notice_printed_over_two_lines_is_harmless_however_the_paste_arrives(kind):
    # transformers' notice of newly initialized weights, its two lines as printed: no line alone is
    # the message, and no line carries an error's words (piped, only such lines are tried whole)
    text = ("Some weights of Wav2Vec2Model were not initialized from the model checkpoint at "
            "facebook/wav2vec2-base-960h and are newly initialized: ['wav2vec2.masked_spec_embed']\n"
            "You should probably TRAIN this model on a down-stream task to be able to use it for predictions and inference.\n")
    report = explain(io.BytesIO(text.encode("utf-8")), RECIPES, kind=kind)
    assert report.matches and all(m.harmless for m in report.matches), [(m.rule, m.harmless) for m in report.matches]


def test_a_pastes_lines_are_joined_only_where_one_continues_the_other():
    first = "Some weights of Wav2Vec2Model were not initialized from the model checkpoint at x"
    second = "You should probably TRAIN this model on a down-stream task."
    assert cat._paste_joins([(first, 1), (second, 2)]) == [(first + " " + second, 1)]
    assert cat._paste_joins([(first, 1), (second, 3)]) == []  # a blank line between them: two messages
    assert cat._paste_joins([(first, 1), ("RuntimeError: CUDA error: out of memory", 2)]) == []  # a message of its own
    assert cat._paste_joins([("short line", 1), (second, 2)]) == []  # too short to have been wrapped
    three = cat._paste_joins([(first, 1), (second, 2), ("and more words here", 3)])
    assert [n for _, n in three] == [1, 1, 2] and three[1][0].endswith("and more words here")


# mtime=0: the bytes (and so the test's id) are the same in every pytest-xdist worker
def test_a_failures_message_goes_before_a_library_notice_in_the_same_paste():
    # auto-gptq's warning that its CUDA kernels were not built, beside safetensors' metadata notice
    # (the longer message): the paste is not labelled harmless on the notice's strength
    # (pasted as the command's argument: every line is read, not only those with an error's words)
    text = ('D:\\llama2_local>python llama.py --model_name="TheBloke/Llama-2-7b-Chat-GPTQ"\n'
            "CUDA extension not installed.\n"
            "The safetensors archive passed at /home/u/.cache/gptq_model-4bit-128g.safetensors does not "
            "contain metadata. Make sure to save your model with the `save_pretrained` method. Defaulting to "
            "'pt' metadata.\n"
            "skip module injection for FusedLlamaMLPForQuantizedModel not support integrate without triton yet.\n"
            "Running on local URL:  http://127.0.0.1:7860\n")
    report = explain(io.BytesIO(text.encode("utf-8")), RECIPES, kind="text")
    m = next((x for x in report.matches if not x.harmless), None)
    assert m is not None and m.rule == "AD354" and report.exit_code == 1, [(x.rule, x.harmless) for x in report.matches]


@pytest.mark.parametrize("damage", [b"", b"not gzip at all", gzip.compress(b"{broken json\n", mtime=0),
                                    gzip.compress(b'{"parts": 3}\n', mtime=0)],
                         ids=["empty", "not gzip", "broken json", "a row without its fields"])
def test_a_damaged_catalogue_leaves_explain_working_without_it(tmp_path, damage):
    folder = tmp_path / "recipes"
    shutil.copytree(ROOT / "recipes", folder)
    (folder / cat.CATALOGUE_NAME).write_bytes(damage)
    recipes = load_recipes(folder)
    m, report = _first("RuntimeError: cu_seqlens_k must be on CUDA", recipes)
    assert m is None
    # the signatures still work
    assert _first("RuntimeError: FlashAttention only supports Ampere GPUs or newer.", recipes)[0].rule == "AD103"


def test_the_cli_prints_the_site_and_its_json_carries_it():
    env_text = "RuntimeError: cu_seqlens_k must be on CUDA\n"
    out = subprocess.run([sys.executable, "-m", "attn_doctor", "explain", "-"], input=env_text, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 1, out.stderr
    assert "raised by: flash-attn" in out.stdout and "flash_api.cpp" in out.stdout
    out = subprocess.run([sys.executable, "-m", "attn_doctor", "explain", "--json", "-"], input=env_text,
                         capture_output=True, text=True, timeout=120)
    doc = json.loads(out.stdout)
    site = doc["matches"][0]["site"]
    assert site["family"] == "attention-on-cpu" and site["complete"] is True and site["at"]


def test_lookup_is_fast_enough_for_every_candidate_line():
    import time

    catalogue = cat.loaded(RECIPES)
    lines = ["RuntimeError: something else went wrong in layer %d of the model, retrying" % i for i in range(200)]
    started = time.perf_counter()
    assert catalogue.first(lines) is None
    assert time.perf_counter() - started < 0.5


def test_a_half_weight_beside_a_float_input_on_one_device_is_a_precision_mismatch():
    m, _ = _first("RuntimeError: Input type (torch.cuda.FloatTensor) and weight type (torch.cuda.HalfTensor) "
                  "should be the same")
    assert m is not None and m.rule == "AD651"
    m, _ = _first("RuntimeError: Input type (CUDABFloat16Type) and weight type (torch.cuda.FloatTensor) should be the same")
    assert m is not None and m.rule == "AD651"


def test_transformers_bf16_refusal_is_read_by_whether_its_cuda_only_sentence_follows():
    # training_args.py adds the Ampere sentence only where CUDA is available (transformers 4.57 and later)
    m, _ = _first("ValueError: Your setup doesn't support bf16/gpu.")
    assert m is not None and m.rule == "AD259"
    m, _ = _first("ValueError: Your setup doesn't support bf16/gpu. You need Ampere+ GPU with cuda>=11.0")
    assert m is not None and m.rule == "AD102"
    # the same sentence a wrapped paste put on the next line
    m, _ = _first("ValueError: Your setup doesn't support bf16/gpu.\nYou need Ampere+ GPU with cuda>=11.0")
    assert m is not None and m.rule == "AD102"


@pytest.mark.parametrize("line", [
    "RuntimeError: routing_bias must be bfloat16 or float.",
    "RuntimeError: routing_bias must be bfloat16 or float",  # a log or a paste without the closing stop
])
def test_a_message_is_read_with_or_without_its_closing_stop(line):
    m, _ = _first(line)
    assert m is not None and m.rule == "AD287" and m.site is not None and m.site.complete
    # the stop is optional only where the message ends: a longer word, or a longer sentence, is not the message
    assert _first("RuntimeError: routing_bias must be bfloat16 or floating in my fork")[0] is None
    assert _first("RuntimeError: routing_bias must be bfloat16 or float in my fork")[0] is None


def test_a_message_copied_from_a_web_pages_source_is_read_through_its_entities():
    for line in ("- fix &quot;reflection_pad1d&quot; not implemented for &#x27;Half&#x27; [[536c19b](https://example.org)]",
                 "RuntimeError: &quot;reflection_pad1d&quot;&nbsp;not implemented for &#8216;Half&#8217;"):
        m, _ = _first(line)
        assert m is not None and m.rule == "AD266", line
