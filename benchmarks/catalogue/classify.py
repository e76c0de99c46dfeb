"""Give every in-scope site of the message catalogue its cause family, read from the site itself:
the condition the library checks (`q.dtype() == torch::kFloat16`, `q.is_cuda()`, `head_size <= 256`,
`is_sm90`), the words of its message, its exception class and kind. The result is the catalogue
`explain` ships (recipes/catalogue.jsonl.gz): one entry per distinct message of the in-scope sites,
with its family, the rule that explains it and where each library raises it.

Families are the corpus's (tests/corpus/families.toml) wherever the mechanism is one of them; the
rest are the broad ones a source check states (an argument's shape, an option the build lacks, an
internal invariant), each with a rule of recipes/catalogue.toml. A site none of the tests reads is
left "unclassified" and counted; a site that is in scope by its words but is not about the stack
(capacity, a tokenizer, a dataloader) is marked out with its reason.

    python benchmarks/catalogue/classify.py                 # write recipes/catalogue.jsonl.gz, print the table
    python benchmarks/catalogue/classify.py --sample 40     # also 40 random sites per family, to audit
    python benchmarks/catalogue/classify.py --unclassified 50
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import random
import re
import sys
from pathlib import Path

import python_messages

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SITES = HERE / "sites"
OUT = ROOT / "recipes" / "catalogue.jsonl.gz"
CONDITION_MIN = 24  # a message classified by its condition alone needs this much literal text to be shipped
MIN_LITERAL = 12  # a message whose literal text is shorter than this cannot be recognised in a paste


def _rx(*words):
    return re.compile("|".join(words), re.I)


class _AllOf:
    """A message test made of several expressions, each searched once (linear however long the
    message): all of `rxs` found and none of `none_of`."""

    def __init__(self, *rxs, none_of=None):
        self.rxs, self.none_of = rxs, none_of

    def search(self, text):
        return all(r.search(text) for r in self.rxs) and not (self.none_of is not None and self.none_of.search(text))


_MIXED = _rx(r"(?:must|should) (?:have|be) the same (?:dtype|type|scalar type|data ?type)", r"same dtype",
             r"outside (?:of )?(?:an? )?autocast(?:ed|ing)? (?:region|context)",
             r"dtypes? (?:do not|don't|must) match", r"dtype mismatch", r"type mismatch",
             r"(?:to|must) have the same dtype", r"and \w+ type .* should be the same",
             r"\bExpected \w+\.dtype to be equal to \w+\.dtype")
# the words of something missing or required: a package, a module, a library, a tool
# "could not find a valid config / a compatible kernel" is a search for a kernel that fits the call
_FITTING = r" (?:a |any )?(?:valid|suitable|compatible|matching|usable) "
_MISSING = (r"not installed", r"pip install", r"no module named", r"is not available", r"please install",
            r"could not (?:find(?!" + _FITTING + ")|import|load)", r"cannot (?:find(?!" + _FITTING + ")|import|load)",
            r"failed to (?:import|load)",
            r"unable to (?:import|load)", r"not found", r"missing\b", r"is required(?! for)",
            r"(?:package|library|module|flash[_-]?attn|xformers|triton|flashinfer|apex|bitsandbytes)[\w-]*`?\s+(?:is|are) required for",
            r"[<>=]=? ?[\d.]+`?\s+(?:is|are) required for", r"required for [^.]{1,60}\. Install from\b", r"requires the .* package",
            r"install (?:it|\w+) (?:with|from|via)")
# the pieces of the attention stack a message can name: its libraries, their compiled parts, CUDA's
# and ROCm's libraries and tools, the devices
_STACK_PIECE = re.compile(
    r"(?i)flash[_ -]?attn|flash[_ -]?attention|flash_?mla|xformers|triton|sage[_ -]?attn|sage[_ -]?attention|spas_sage|sparge|"
    r"flashinfer|\bapex\b|bitsandbytes|\bbnb\b|deepspeed|\bds_|mamba|causal[_-]?conv1d|selective_scan|natten|\bfla\b|"
    r"flash[-_ ]linear|liger|cutlass|\bcute\b|cute[_-]?dsl|\bkernels\b|transformer[_ -]?engine|\bfused|_C\b|_ext\b|\w_cuda\b|"
    r"_cuda_\w|\bcsrc\b|extension|compiled|\bkernel|cubin|rotary_emb|layer_norm|xentropy|ring[_-]?flash|yunchang|xfuser|"
    r"megablocks|grouped_gemm|deep_?gemm|deep_?ep|sonic|quack|tilelang|thunderkittens|\bcuda\b|\bcudnn|\bcublas|nccl|"
    r"\bnvcc\b|ptxas|nvrtc|\bhip\b|rocm|aotriton|ck_tile|composable|marlin|exllama|awq|gptq|\bfp8\b|torchao|\bmslk\b|"
    r"\bvllm\b|sglang|tensorrt|\btrt\b|\bops?\b|attention|attn|\bgpu\b|\bmps\b|\bxpu\b|\bnpu\b|hipblas\w*|rocblas|miopen|"
    r"\bmla\b|kv.?cache|paged|block.?size|aiter|flex|flash_\w+|\bkda\b")
_FEATURE_REFUSED = _rx(r"(?:could not|cannot|unable to|failed to) find" + _FITTING + r"(?:\w+ ){0,4}(?:kernel|config|solution|backend)",
                       r"not (?:yet )?supported", r"unsupported", r"does(?: not|n't) support", r"not implemented",
                       r"only supports?", r"\bsupports? only\b", r"is only (?:supported|available|implemented)", r"not (?:yet )?available",
                       r"cannot be used (?:with|together|when|for)", r"can(?:not|'t) be combined", r"(?:is|are) not allowed",
                       r"no (?:kernel|implementation|support) (?:for|available)", r"\bno (?:valid )?(?:kernel|config)",
                       r"not (?:a )?valid (?:combination|option)", r"\bonly (?:works|available|valid|implemented) (?:for|with|when|on)",
                       r"requires? (?:that |the )?\w+ (?:to be|be) (?:enabled|disabled|set|true|false|none)", r"\bnot (?:yet )?enabled",
                       r"failed to dispatch", r"no suitable", r"(?:is|are) not compatible", r"incompatible",
                       r"had not been implemented", r"no layer mapping", r"No (?:compiled )?tier covers", r"\bno \w+ kernel for\b",
                       r"is supported only with", r"Gradients not supported", r"Mutations detected", r"is not support\b",
                       r"Only \S+ supported", r"does not define any", r"is a CUDA \w+ backend", r"on ROCm use")
_ATTENTION_SITE = re.compile(r"attn|attention|fmha|flash_|mha|sdp|sage|decode|prefill|\bmla\b", re.I)

# (family, rule, test on the message, test on the condition, kinds that decide by themselves[, kinds
# the family is limited to]); the first family whose tests hold wins. `cond` reads the checked expression, which states the constraint
# whatever the message's wording; `msg` the literal text.
FAMILIES = [
    # out of the stack although their words put them in scope
    ("out:capacity", None, _rx(r"out of memory", r"\bOOM\b", r"dispatched on the CPU or the disk", r"enough GPU RAM"), None, None),
    # an INFO log line or a deprecation reports, it does not stop the run, whatever its words (DeepSpeed's
    # loss scaler skipping an overflowing step logs at INFO from its runtime); a rule's own signature
    # for the rare one that says a run is lost (a loss scale at 0.0) decides before this
    ("harmless", "AD656", None, None, ("log:INFO", "warn:FutureWarning", "warn:DeprecationWarning",
                                       "warn:PendingDeprecationWarning")),
    # a warning that advises a setting ("Consider enabling moe_router_dtype for better numerical
    # stability") names what could be better, not what failed: the refusal families below read words
    # like dtype or shape that such advice also uses
    ("harmless", "AD656", _rx(r"\bconsider (?:enabling|using|setting|switching|passing|increasing|reducing)\b",
                              r"\bfor better (?:numerical stability|accuracy|performance|efficiency)\b"),
     None, None, ("warn", "log:WARNING")),
    # a warning that the run goes on, only slower (an extension built for an older GPU, an input copied
    # to the device): whatever it names, the library carries on
    ("harmless", "AD656", _rx(r"\bsuboptimal\b", r"\bperformance (?:may|might|will|could) (?:be|suffer|degrade)",
                              r"\b(?:may|might|will|could) (?:be|run) (?:much |significantly )?slower\b"),
     None, None, ("warn", "log")),
    # a training framework's own settings (its config, its plugins, FSDP's and DeepSpeed's options)
    ("framework-setting", "AD286", _rx(r"\bconfig", r"\bsetting", r"\boption", r"\bflag\b", r"\bargument", r"\bparameter",
                                       r"\bplugin\b", r"mixed[_ ]precision", r"\bstage\b", r"\bzero\b", r"\bfsdp\b",
                                       r"\bdeepspeed\b", r"\bset (?:to|it)\b", r"\bpass(?:ed|ing)? (?:in )?`", r"=True", r"=False",
                                       r"\bnot (?:yet )?(?:supported|implemented|compatible)", r"\bbut not both\b",
                                       r"\bcan(?:not)? be (?:True|False|used together)\b"),
     None, None, None, re.compile(r"^(?:accelerate/|deepspeed/runtime/|torch/distributed/|transformers/(?:training_args|trainer)"
                                  r"\.py|transformers/quantizers/)")),
    # a dynamic loss scaler at its floor: fp16 gradients inf or NaN at every step (fairseq, apex, DeepSpeed)
    ("fp16-overflow", "AD660", _rx(r"\bMinimum loss scale reached\b", r"\bloss scale (?:has )?(?:reached|hit|fell to) (?:its |the )?minimum\b"),
     None, None),
    # optimum's BetterTransformer: a patch of transformers' attention that transformers has replaced by
    # its own SDPA path, refused for the models that have it
    ("patch-for-other-transformers", "AD412", _rx(r"Transformers now supports natively BetterTransformer",
                                                  r"no need to use `?model\.to_bettertransformer"), None, None, None,
     re.compile(r"^optimum/bettertransformer/")),
    # BetterTransformer's fused encoder returns no attention weights, and takes no mask for vision models
    ("model-lacks-attention-implementation", "AD408", _rx(r"output_attentions=True can not be supported with BetterTransformer",
                                                          r"do not use attention masks when using `?BetterTransformer"),
     None, None, None, re.compile(r"^optimum/bettertransformer/")),
    # bitsandbytes' CUDA setup found no CUDA runtime it can load (or no binary of its own for it)
    ("cuda-runtime-missing", "AD418", _rx(r"CUDA Setup failed despite GPU being available", r"CUDA SETUP: Setup Failed"), None, None,
     None, re.compile(r"^bitsandbytes/")),
    # onnxruntime's check that the CUDA runtime found is the one its build names
    ("cuda-runtime-missing", "AD418", _rx(r"failed to find cudart version that matches", r"found cudart versions: "), None, None, None,
     re.compile(r"^onnxruntime/")),
    # torchvision's and torchaudio's check at import that their build is for torch's CUDA: a build for another torch
    ("extension-no-build-for-torch", "AD312", _rx(r"compiled with different CUDA (?:major )?versions"), None, None, None,
     re.compile(r"^torch(?:vision|audio)/")),
    # a compiled library shipped per torch release, missing for this one (DGL's GraphBolt)
    ("extension-no-build-for-torch", "AD312", _rx(r"C\+\+ \w+ library at [^.]{0,40}\. This error typically occurs due to a "
                                                  r"version mismatch between the installed \w+ and the PyTorch version"), None, None),
    # a machine without the GPUs the job asks for: no CUDA at all, or fewer GPUs than the job's device count
    ("no-cuda-platform", "AD259", _rx(r"no (?:visible )?CUDA devices", r"no supported gpu backend",
                                      r"CUDA driver initialization failed, you might not have a CUDA gpu",
                                      r"no (?:CUDA )?GPUs? (?:is |are )?(?:available|found|detected)",
                                      r"torch\.cuda\.is_available\(\) should be True but is False",
                                      r"cannot find any (?:torch )?accelerator", r"\byou need a GPU\b"), None, None),
    ("framework-setting", "AD286", _rx(r"only has \S* ?GPUs", r"accelerator set to", r"choose one device type"), None, None),
    # an invariant of a compiler or a kernel template (inductor, dynamo, CUTLASS/CuTe): not the caller's
    ("library-internal", "AD283", None, None, ("assert", "raise:AssertionError"), None,
     re.compile(r"^(?:torch/_inductor/|torch/_dynamo/|torch/_higher_order_ops/|flash_attn/cute/(?!interface)|"
                r".*cutlass|.*/cute_dsl/|triton/compiler/|triton/runtime/)")),
    # torch's extension builder: no compiler (MSVC's cl on Windows), a host compiler outside the range
    # this CUDA's nvcc takes, an architecture its table does not know (a torch older than the GPU): the
    # build environment, not a package's version or the GPU
    ("build-env", "AD315", _rx(r"Unknown CUDA arch", r"Compiler: .{0,20}is not found",
                               r"Could not find MSVC/GCC/CLANG", r"(?:maximum|minimum) required version by CUDA"), None, None, None,
     re.compile(r"^torch/(?:utils/cpp_extension|_inductor/cpp_builder)\.py$")),
    # its notices that torch sees no CUDA runtime, that nvcc's minor release differs from torch's CUDA ("most likely
    # not a problem"), that it knows no compiler bounds for this CUDA, that it could not run the compiler to read its
    # version: facts it prints and builds on, not failures (a build that then fails says so in its own words,
    # which AD315's signatures read)
    ("harmless", "AD656", _rx(r"No CUDA runtime is found, using CUDA_HOME", r"minor version mismatch", r"version bounds defined",
                              r"Error checking compiler version for"),
     None, None, None, re.compile(r"^torch/utils/cpp_extension\.py$")),
    # a warning that says what the library does instead (resets an option, skips a fused module, falls
    # back, switches backend): the run goes on, whatever was missing
    ("harmless", "AD656", _rx(r"\b[Aa]pplied (?:a |the )?workaround\b", r"\breset(?:ting)? \w+ to (?:True|False)\b", r"\bwill skip\b", r"\bskip(?:ping)? (?:the )?inject",
                              r"\bswitch(?:ing)? to (?:the )?\w+(?:/\w+)* backend\b", r"\bfall(?:ing|s)? back to\b"),
     None, None, ("log:WARNING", "warn", "log:INFO")),
    # a library's own compiled extension it says is not installed or built (AutoGPTQ's "CUDA extension not
    # installed.", "Please compile MultiScaleDeformableAttention CUDA op"): the package's build, not a
    # missing attention library
    ("extension-not-built", "AD354", _rx(r"\b(?:CUDA|C\+\+|cpp|compiled|native) (?:extension|kernel|op)s? (?:is |are |was |were )?"
                                         r"not (?:installed|built|found)\b", r"\bplease compile\b.{0,60}\b(?:op|ops|extension)s?\b"),
     None, None),
    # a kernel of the library that was not compiled into this install (SageAttention's per-SM builds)
    ("build-feature", "AD289", _rx(r"\bkernel is not available\b", r"\bnot compiled\b", r"\brequires (?:the )?(?:cuda|CUDA|C\+\+|cpp) extensions?\b",
                                            r"without (?:its )?(?:--cuda_ext|--cpp_ext|(?:CUDA|C\+\+|cpp) extensions?)"), None, None),
    # a warning or a log line that says what the library does instead is a notice
    ("harmless", "AD656", _rx(r"\bfall(?:ing|s)? back\b", r"\bfallback\b", r"\binstead\b", r"\bwill use\b", r"\bignor(?:ed|ing)\b",
                              r"\bskipp(?:ed|ing)\b", r"\bdisabl(?:ed|ing)\b",
                              # ... or what it does to the tensors or settings it was given, and goes on
                              r"\bcasting (?:\w+ )?to\b", r"\b[Ww]ill (?:change|switch|convert|cast|default|keep)\b",
                              r"\b[Ww]e will (?:cast|default|convert|use|keep)\b", r"\bkeeping (?:a |the )?\w+",
                              r"\b[Pp]erforming [\w-]+ in high precision\b", r"\b[Dd]equantizing and requantizing\b",
                              r"^Padding \w+ from\b", r"\b[Ee]xcluding (?:from|\w+ from)\b", r"\bOverrid+ing \w+ to\b",
                              r"\b[Ww]e (?:had )?convert(?:ed)? \w+ to\b"), None, None, ("warn", "log")),
    # a CUDA library's status reported by the wrapper that called it (its code quoted in the message
    # names strides and dtypes: the failing call, not the constraint)
    ("cuda-call-failed", "AD285", _rx(r"^(?:CUDA|cuDNN|cuBLAS\w*|hipblas\w*|cusparse\w*|NCCL|CUTLASS|nvrtc|Driver API) "
                                      r"error", r"when calling `", r"_STATUS_", r"\bcudaError", r"\bCUresult"), None, None),
    # SDPA saying which of its kernels it skipped, and why
    ("sdpa-fallback", "AD252", _rx(r"(?:can't|cannot|not) (?:be )?used because", r"has been runtime disabled",
                                   r"fused kernels do not support"), None, None),
    # a library announcing the backend it chose instead
    ("harmless", "AD657", _rx(r"falling back to (?:`|the )", r"using `[^`]*` from the `kernels` library",
                              r"keeping `", r"keeping current kernels", r"hub usage is disabled"), None, None, ("warn", "log")),
    ("harmless", "AD265", _rx(r"during autotuning", r"autotuning benchmarks failed", r"Ignoring this choice",
                              r"defaulting to extern kernels", r"Precompilation timeout", r"COLLECTIVE AUTOTUNING"),
     None, None, ("warn", "log")),
    # building an extension from source: CUDA_HOME, ninja, the compiler's environment
    ("build-env", "AD315", _rx(r"CUDA_HOME", r"ROCM_HOME", r"\bninja\b", r"DISTUTILS_USE_SDK", r"VC environment",
                               r"unable to compile CUDA op", r"pre-compile", r"SYCL runtime"), None, None),
    # a Triton kernel's own source uses what this Triton's code generator does not take
    ("triton-compiler", "AD263", _rx(r"AST \w+ (?:node|operator)", r"not \(currently\) implemented",
                                     r"inside `?(?:while|for|with)`? statements", r"conditionals can only accept",
                                     r"non-constexpr", r"Tensor with more than one value is ambiguous",
                                     r"All choices failed to compile", r"No choices exist for backend",
                                     r"Triton cache error", r"graph break", r"`return` statements"), None, None),
    # a call into a module that this release of it lacks: code written for another release
    ("fa-api-skew", "AD311", _rx(r"has no attribute", r"is not declared in function definition"), None, None),
    # the kernels hub: no build of the kernel for this system's torch / CUDA / platform
    ("extension-no-build-for-torch", "AD312", _rx(r"build variant", r"applicable variant", r"Variant path does not exist",
                                                  r"No prebuilt binary", r"Unsupported platform"), None, None),
    # NaN reaching a kernel's inputs: a float16 overflow upstream, most often
    ("fp16-overflow", "AD660", _rx(r"contains NaN", r"\bnan or inf\b", r"non-finite", r"\binf or nan\b"), None, None),
    # a notice, not a failure
    ("harmless", "AD656", _rx(r"deprecat", r"will be removed", r"is experimental", r"\bprototype\b",
                              r"consider (?:using|setting)", r"for better (?:performance|efficiency)",
                              r"we suggest", r"you may want to", r"\bfalling back\b", r"non-deterministic",
                              r"\bno-op\b", r"recommend", r"redirected", r"offline mode", r"\bskipping\b",
                              r"will be ignored", r"won't take effect", r"defaulting to", r"switching to",
                              r"you can use .* to install", r"dirty git tree", r"\boverriding\b", r"\bwas disabled\b",
                              r"Trying to (?:enable|restore|find)", r"looks like a repo_id", r"Could not generate", r"non-existent",
                              r"will not be saved", r"continuing without", r"could result in performance",
                              r"will be slow", r"Saving the full checkpoint instead", r"now calls", r"can be ignored",
                              r"This is normal", r"^Forcing ", r"Detected different devices", r"NUMA node",
                              r"detection failed", r"\buses external\b"),
     None, None, ("warn", "log")),
    # the build: the library, the extension or torch compiled without what the call needs
    ("build-feature", "AD289", _rx(r"not compiled with", r"compiled without", r"was not (?:built|compiled)",
                                   r"(?:build|built) (?:does not|doesn't|did not) (?:support|include)",
                                   r"not (?:built|compiled) (?:with|for)", r"rebuild",
                                   # rebuilding the library; not Dynamo's recompiling of a graph
                                   r"\brecompile(?:d|s)?\b(?! the graph| reasons| when torch\.compile)",
                                   r"\bbuilt without\b", r"was built with(?:out)?\b", r"disabled at (?:build|compile)",
                                   r"compile(?:d)? with .*(?:enabled|=1|on)\b", r"enable it at build",
                                   r"(?:flag|option) .* at (?:build|compile) time", r"^#error"),
     None, None),
    ("build-feature", "AD289", None, None, ("error:#error (compile time)",)),
    # the machine: the GPU's architecture
    ("kernel-gpu-unsupported", "AD317",
     _rx(r"\bsm_?\d{2,3}[a-z]?\b", r"\bSM ?\d{2,3}", r"compute capabilit", r"\bampere\b", r"\bhopper\b", r"\bturing\b",
         r"\bvolta\b", r"\bblackwell\b", r"\bSM ?\d+\.\d\b", r"device capability", r"\bgfx\d", r"\bcdna\d?\b", r"\bMI\d{3}", r"\barch(?:itecture)?\b", r"\bCUDA architectures\b",
         r"\bgpu (?:is not|isn't) supported", r"not supported on (?:this|the current|your) (?:gpu|device)",
         r"\bH100\b", r"\bA100\b", r"\bB200\b"),
     _rx(r"is_sm\d", r"sm\d{2}", r"\bmajor\b", r"compute_capability", r"capability", r"\barch\b", r"cc_major",
         r"dprops->major"), None),
    # torch's check that its build's CUDA is older than the GPU needs ("which requires CUDA_VERSION >=
    # 9000 ... your PyTorch was compiled with CUDA_VERSION 8000"): the build, not the inputs' device
    ("no-kernel-image", "AD105", _rx(r"which requires CUDA_VERSION >=", r"your PyTorch was compiled with CUDA_VERSION"),
     None, None),
    # the inputs' device
    ("attention-on-cpu", "AD256",
     _rx(r"must be (?:a |on )?(?:a )?cuda", r"on cuda\b", r"cuda tensor", r"not implemented (?:on|for) cpu",
         r"on the same (?:cuda )?device", r"same device", r"must be on (?:the )?(?:gpu|device)", r"\bdevice mismatch",
         r"on (?:the )?cpu\b", r"requires cuda", r"\bgpu tensor"),
     _rx(r"is_cuda\(\)", r"\.is_cuda\b", r"device\(\)\.is_cuda", r"device_type == kDLCUDA", r"\.device\(\) ==",
         r"device_type\b", r"\.device\b"), None),
    # memory layout
    ("attention-input-not-contiguous", "AD257",
     _rx(r"contiguous", r"\bstride", r"\baligned\b", r"alignment", r"memory format"),
     _rx(r"is_contiguous", r"IsContiguous", r"stride\(", r"\.strides?\b", r"stride_", r"% ?align", r"_aligned"),
     None),
    # a shape the call must give (a head size among its dimensions does not make it a head-dim limit)
    ("kernel-arguments", "AD282", _rx(r"must (?:have|be of) shape", r"\bshape \(", r"shape mismatch", r"sizes? mismatch",
                                      r"expected shape", r"must have (?:the )?same shape"), None, None),
    # head dimension
    ("fa-head-dim", "AD603",
     _rx(r"head[_ ]?(?:dim|size|dimension)", r"headdim", r"\bhdim\b", r"\bd_?head\b", r"head_size", r"dim_?qk",
         r"last dimension of (?:q|k|v|query|key|value|inputs)"),
     _rx(r"head_?(?:dim|size)", r"headdim", r"\bhdim\b", r"\bd_?head\b", r"HEAD_DIM", r"head_dim_v"), None),
    # two inputs that must share a dtype and do not: in an attention kernel, q, k and v (a promotion
    # upstream); elsewhere, a layer meeting inputs of another precision outside autocast
    ("qkv-mixed-half", "AD602", _MIXED, None, None, None, _ATTENTION_SITE),
    ("autocast-scope", "AD651", _MIXED, None, None, None, re.compile(r"^(?!triton/|python/triton/)")),
    # dtypes
    ("kernel-dtype", "AD287",
     _rx(r"\bdtype", r"data ?type", r"scalar type", r"\bfp16\b", r"\bbf16\b", r"\bfp8\b", r"\bfloat16\b",
         r"\bbfloat16\b", r"\bfloat32\b", r"\bhalf\b", r"\bfp32\b", r"\bint8\b", r"\bint32\b", r"\bint64\b",
         r"Inconsistency of Tensor type", r"type mismatch", r"\bfp4\b", r"\bnvfp4\b", r"\bmxfp\d", r"e4m3",
         r"e5m2", r"precision"),
     _rx(r"dtype", r"scalar_type", r"ScalarType", r"kFloat", r"kHalf", r"kBFloat", r"kInt", r"dl_\w+"), None),
    # a library refusing the installed torch for want of an attention API a later torch has
    ("torch-too-old-api", "AD413",
     _rx(r"(?:PyTorch|torch)(?: version)?\b[^.\n]{0,40}\b(?:does not|doesn't|do not|cannot) (?:support|have|provide) (?:the )?`?"
         r"(?:F\.|torch\.nn\.functional\.)?(?:scaled_dot_product_attention|flex_attention|sdpa\b)",
         r"(?:scaled_dot_product_attention|flex_attention|\bsdpa\b)[^.\n]{0,60}\brequires? (?:PyTorch|torch)\b"),
     None, None),
    # a library asks for another release of a package
    ("package-version", "AD288",
     _rx(r"\bversion\b", r">= ?\d", r"\brequires? (?:\w+ )?\w*[- ]?\d+\.\d+", r"\bupgrade\b", r"\bnewer\b",
         r"\bolder\b", r"\bat least\b \d", r"\bcuda \d+\.\d+\b.*(?:above|later|newer|required|or higher)",
         r"(?:above|later|newer|or higher)\b", r"\bCUDA_VERSION\b", r"\bTORCH_VERSION", r"cudnn_version",
         r"\brelease\b", r"use CUDA \d+"),
     _rx(r"version", r"CUDA_VERSION", r"__version__", r"TORCH_VERSION"), None),
    # a general-purpose package the code needs is not installed (accelerate for device_map, tqdm,
    # TensorFlow, a logger's SDK): a missing dependency, not a piece of the attention stack
    ("out:unrelated-package", None,
     _AllOf(_rx(r"\b(?:requires?|needs?|install(?:ed)?|available|found)\b"),
            _rx(r"\b(?:`?accelerate`?|tqdm|azureml\S*|tensorflow|sentencepiece|protobuf|tiktoken|scipy|scikit-learn|"
                r"sklearn|pandas|datasets|librosa|soundfile|wandb|tensorboard\w*|mlflow|comet_ml|clearml|neptune|"
                r"dvclive|codecarbon|pillow)\b"),
            none_of=_rx(r"flash|xformers|triton|\bapex\b|cuda|kernel|\bsage|bitsandbytes|deepspeed|fused|attention|"
                        r"\battn|fp8|cutlass|\bgpu|rocm|\bhip\b|nvidia|driver|fp16|bf16|\bhalf\b|\bamp\b|PyTorch library")),
     None, None),
    # a library or its extension is not there or does not load
    # Triton's search for the driver's unversioned libcuda.so in the linker cache (Colab, WSL, a
    # container): a driver library's location, which no family describes yet
    ("unclassified", None, _rx(r"libcuda\.so cannot found"), None, None),
    # something missing that is no piece of the attention stack (a logger's SDK, an export backend, a
    # vector store's client, a config field, an internal tensor): the code's own dependency or state,
    # which "an optional attention library is not installed" would misname; a kernel library's own
    # sites are its pieces whatever their words
    ("out:something missing that is no piece of the attention stack (another package, a tool, a config field or an internal state)", None,
     _AllOf(_rx(*_MISSING), none_of=_STACK_PIECE),
     None, None, None, re.compile(r"^(?!flash_attn/|hopper/|xformers/|flashinfer/|include/flashinfer/|sageattention/|mamba_ssm/|"
                                  r"causal_conv1d/|natten/|fla/|kernels/|bitsandbytes/|op_builder/|csrc/|vllm/|(?:python/)?sglang/|"
                                  r"transformer_engine/|torch/_inductor/kernel/)")),
    ("attention-library-missing", "AD353", _rx(*_MISSING), None, ("raise:ImportError", "raise:ModuleNotFoundError")),
    # a CUDA library or the runtime returned an error status
    ("cuda-call-failed", "AD285",
     _rx(r"(?:cudnn|cublas\w*|cusparse|cufft|cusolver|curand|\bnccl|cutlass|hipblas\w*|\bmiopen|\brocblas)\w*\W{0,3}"
         r"(?:\w+\W{1,3}){0,3}(?:error|fail|status|could not|cannot|unable)", r"cudaError", r"CUDA error", r"CUDA driver error", r"CUresult", r"\bnvrtc",
         r"cuda(?:Get|Set|Malloc|Memcpy|Launch|Func|Stream|Event|Graph|Device)\w*", r"\bstatus\b", r"failed with",
         r"launch failed", r"kernel launch", r"\bcu\w+ failed", r"initialize failed", r"\bfailed: ?$",
         r"\bcompile (?:error|failed)", r"\bjit\b", r"\bptx", r"\bcubin\b", r"\bnvcc\b",
         r"^Error .* at line .* in file", r"\berror detected\b", r"Driver API error", r"Matmul Algo Heuristic",
         r"Error in \w+", r"\bsynclog\b"),
     _rx(r"cudaSuccess", r"CUDNN_STATUS_SUCCESS", r"CUBLAS_STATUS_SUCCESS", r"CUDA_SUCCESS", r"_STATUS_SUCCESS",
         r"status ==", r"err == ", r"__err == ", r"error == ", r"cutlass::Status::kSuccess"), None),
    # shared memory and other per-GPU resources
    ("triton-shared-memory", "AD262",
     _rx(r"shared memory", r"\bsmem\b", r"out of resource", r"too many resources", r"registers?\b.*exceed",
         r"exceeds? (?:the )?(?:hardware|device) limit"),
     _rx(r"smem", r"shared_mem", r"max_shared", r"sharedMemPerBlock"), None),
    # an option the kernel (or this build / this GPU) has no path for; in a serving engine's attention
    # backend, the backend the engine chose (or was told to use) lacking what the model or its settings need
    ("serving-attention-backend", "AD281", _FEATURE_REFUSED, None, ("raise:NotImplementedError",), None,
     re.compile(r"^(?:vllm/(?:v1/)?attention/backends/|(?:python/)?sglang/srt/layers/attention/)")),
    ("kernel-feature-unsupported", "AD284",
     _FEATURE_REFUSED,
     None, ("raise:NotImplementedError",)),
    # what Triton's code generator, JIT and interpreter say of a kernel's own source
    ("triton-compiler", "AD263", None, None, ("raise", "assert", "warn", "check"), None,
     re.compile(r"^triton/(?:compiler/code_generator|runtime/jit|runtime/interpreter|runtime/build)\.py$")),
    # the call's arguments: shapes, sizes, counts, ranges
    ("kernel-arguments", "AD282",
     _rx(r"\bshape", r"\bsize", r"\bdims?\b", r"\bdimension", r"\bmust (?:be|have|match|equal|divide|not)",
         r"\bshould (?:be|have|match)", r"\bexpected\b", r"\bexpects?\b", r"\bmismatch", r"\binvalid\b",
         r"\bdivisible\b", r"\bmultiple of\b", r"\bnumber of\b", r"\bnum_\w+", r"\bseq_?len", r"\bbatch",
         r"\bheads?\b", r"\bgot\b", r"\bcannot be\b", r"\bmust not\b", r"\bout of range", r"\bexceed",
         r"\bpositive\b", r"\bnon-?negative\b", r"\bgreater than\b", r"\bless than\b", r"\bat most\b", r"\bat least\b",
         r"\bequal\b", r"\bsame\b", r"\bis None\b", r"\bnot None\b", r"\bprovided\b", r"\bpassed\b",
         r"\bwindow", r"\bcausal\b", r"\bmask\b", r"\bcu_seqlens", r"\bpage", r"\bblock", r"\btoo (?:large|small|many)",
         r"\bunknown\b", r"not recognized", r"mutually exclusive", r"both specified", r"\bonly one of\b",
         r"pass in both", r"\brequires\b", r"can only be (?:called|applied|used)", r"\bnot a valid\b",
         r"insufficient workspace", r"\bno module matched", r"\bis not a\b", r"\bcannot (?:call|get|specify)\b",
         r"already exists", r"\bduplicate\b", r"inconsistent", r"shorter than", r"\boutside\b", r"do not match",
         r"cannot build", r"\bneeds a\b", r"must lie in", r"\bempty\b", r"\bbad \w+", r"mis-mapped"),
     _rx(r"sizes?\(", r"\.size\b", r"\.shape\b", r"\.dim\(\)", r"\.ndim", r"numel", r"<=|>=|<|>", r"==", r"%"), None),
    # a trainer's or a framework's own setting (precision, attention, parallelism) refused
    ("framework-setting", "AD286",
     _rx(r"mixed[_ ]precision", r"\bamp\b", r"\bfp16\b", r"\bbf16\b", r"\bzero\b", r"deepspeed", r"\bfsdp\b",
         r"\bconfig", r"\bsetting", r"\boption", r"\bflag\b", r"\bargument", r"\bparameter", r"\benv(?:ironment)? var",
         r"\bplugin\b", r"quantiz", r"\bscaler\b", r"\bloss scale", r"\bnot locked\b", r"\block file\b",
         r"trusted publisher", r"\bAWQ\b", r"\bGGUF\b", r"\bpeft\b", r"\bliger\b", r"\bElasticity\b"),
     None, None),
    # an invariant the library holds itself: asserts whose words state no user-facing constraint
    ("library-internal", "AD283", _rx(r"^Assertion failed", r"CHECK failed at", r"\bindices out of bound"), None, None),
    ("library-internal", "AD283", None, None, ("assert", "raise:AssertionError", "raise:RuntimeError",
                                              "check", "raise:Exception", "raise:SystemError", "error")),
]


# Sites in scope by their words whose subject is not the stack: the reason is kept with the count.
OUT_OF_STACK = [
    (re.compile(r"^src/ggml-vulkan/"), _rx(r"^ggml_vulkan:\s+(?:error\s+)?at :\s*$", r"^Shared memory size too small for matrix multiplication"),
     "ggml's Vulkan backend: its matmul self-test printouts, and a device's limit its own shaders need (llama.cpp's "
     "Vulkan path, not torch's stack)"),
    (re.compile(r"^src/ggml-cuda/ggml-cuda\.cu$"), _rx(r"^\s*current device: , in function\s+at :"),
     "the place ggml prints under a CUDA error (device, function, file): the error's own line above it carries the cause"),
    (re.compile(r"^torch/__init__\.py$"), _rx(r"^Failed to load the backend extension: "),
     "torch's autoload of an out-of-tree device backend (an installed torch_* plugin package failing to import): the plugin, not the attention stack"),
    (re.compile(r""), _rx(r"mat1 and mat2 shapes cannot be multiplied", r"Expected size for first two dimensions of batch2 tensor to be"),
     "a matrix multiply's operand shapes (torch's own check, repeated by kernel libraries): the model's shapes, not a kernel's limit"),
    (re.compile(r"^onnxruntime/"), _rx(r"WebGPU", r"ModelCompiler", r"package info: ", r"^onnxruntime build info: ",
                                       r"failed to get cudart_version from"),
     "onnxruntime's WebGPU graphs, model compiler and build-info printout: its own API and diagnostics"),
    (re.compile(r"^peft/"), _rx(r"NaNs detected in the merged (?:weights|bias)", r"sampling produced NaNs",
                                r"compiled_hotswap", r"enable_softmax", r"LoRA conversion", r"Rank-Stabilized LoRA",
                                r"AutoPeftModel"),
     "an adapter's own weights, options or API (peft's safe merge finds a broken adapter; hot-swapping, X-LoRA "
     "settings, conversions, its Auto classes): the adapter, not the precision stack"),
    (re.compile(r"^pytorch3d/"), _rx(r"Pulsar assertion failed", r"supported by the pulsar backend", r"NDC to screen",
                                     r"MeshRasterizerOpenGL", r"none with CUDA id"),
     "pytorch3d's renderers' own options and OpenGL interop (cameras, EGL, pycuda.gl): a renderer's setup, not kernels or precision"),
    (re.compile(r"^sentence_transformers/"), _rx(r"token pooling", r"padded embeddings", r"teacher scores contain NaN",
                                                 r"Exporting the model to", r"desired file name via",
                                                 r"To install the required dependencies"),
     "sentence-transformers' pooling, distillation data and backend export files: the model's pipeline or data, not kernels or precision"),
    (re.compile(r"^trl/"), _rx(r"--max-loras", r"Tree packing only routes", r"Dataset\.with_transform"),
     "TRL's dataset preparation and asynchronous trainers' serving options: the training pipeline's setup"),
    (re.compile(r"^torchaudio/"), _rx(r"Frequency and Time masking"), "an audio transform's arguments (SpecAugment's masking axes)"),
    (None, _rx(r'^"?"? not implemented for \'\'$'),
     "a dispatch macro's refusal of a dtype (torch's, and the copies of it in apex and flash-attn), whichever it is: the dtype named decides the cause (a float mask given to a bitwise op, "
     "an integer tensor to a float op are the caller's); the low-precision ones (Half, BFloat16, Float8) are read by their own rules"),
    (None, _rx(r"following scalar types: (?:Long|Int|Short|Byte|Char)(?:, (?:Long|Int|Short|Byte|Char))*;"),
     "an index tensor (an embedding's indices, a bag's offsets) given in a floating dtype: integer dtypes only are named, so "
     "the caller's data built the indices as floats (a .float() on token ids), not a precision the stack chose"),
    (None, _rx(r"^result type\s*\w*\s*can't be cast to the desired output type"),
     "type promotion into an output of a lower dtype category (a float result written into an integer or bool tensor: an "
     "in-place op on an integer tensor, an integer target given to a loss): the caller's dtypes; torch casts between "
     "floating dtypes freely, so half, bfloat16 and float32 never meet this check"),
    (re.compile(r"^deepspeed/runtime/config\.py$"), _rx(r"[Bb]atch size", r"batch related parameters", r"train_batch_size",
                                                       r"micro_batch", r"Gradient accumulation steps"),
     "DeepSpeed's batch arithmetic (train batch = micro batch x accumulation steps x GPUs): the job's configuration, not kernels or precision"),
    (re.compile(r"^ultralytics/"), _rx(r"failure for parse_version", r"QAT models do not support"),
     "ultralytics' own version parsing and quantization-aware training options"),
    (re.compile(r"^flashinfer/api_logging\.py$"), None, "flashinfer's own API logging, dump and replay tooling"),
    (re.compile(r"^torch/backends/xeon/"), None, "torch's CPU launcher (core binding, allocator preload)"),
    (re.compile(r"^triton/runtime/jit\.py$"), _rx(r"is being called from a Triton function but is not a Triton function",
                                                 r"Cannot call @triton\.jit'd outside of the scope of a kernel"),
     "a Triton kernel's own code: a plain Python function called inside a kernel, a kernel function called from Python; "
     "the kernel author's code, not the versions, the GPU or the precision"),
    (re.compile(r"^aten/src/ATen/native/cudnn/RNN\.cpp$"), _rx(r"\bis not contiguous\b"),
     "cuDNN's RNN (LSTM, GRU) checking its input and hidden state's layout: a recurrent layer's tensors, not attention's"),
    (re.compile(r"^transformers/integrations/gguf/"), None, "GGUF file and tokenizer conversion"),
    (re.compile(r"^torch/cuda/__init__\.py$"), _rx(r"NVML", r"amdsmi", r"amd device", r"device UUID", r"device handle",
                                                  r"HIP ID"),
     "GPU management library queries (NVML, amdsmi): torch falls back to the CUDA runtime's own count"),
    (re.compile(r"^transformers/utils/import_utils\.py$"), _rx(r"fetch__all__", r"@requires decorator"),
     "transformers' own source tooling"),
    (re.compile(r"(?:^|/)(?:sharded_)?grad_scaler\.py$"), _rx(r"_scale is None", r"No inf checks were recorded",
                                                              r"has already been called on this optimizer",
                                                              r"unscale_\(\) is being called"),
     "GradScaler's calls made out of order by the training loop (step before scale, an optimizer whose parameters got no "
     "gradient, unscale_ twice): the loop's bug, not a precision limit"),
    (re.compile(r"^(?:accelerate|transformers)/"), _rx(r"on a different device than the one you're training on",
                                                        r"is not supported for `?4-bit`? or `?8-bit`? bitsandbytes models"),
     "a quantized model's placement over devices (device_map), not its precision"),
    (re.compile(r"^xformers/"), _rx(r"^Incompatible shapes for attention inputs"),
     "query, key and value of different batch or head shapes (xformers asks the caller to expand them): the caller's "
     "tensors, not a kernel's limit"),
    (re.compile(r"^torch/nn/functional\.py$"), _rx(r"^The shape of the [23]D attn_mask is"),
     "the attention mask's shape against the caller's batch and sequence layout (a model's code, or a library release "
     "that changed batch_first): the caller's tensors, not a kernel's limit"),
    (None, _rx(r"^\s*is not defined\s*$", r"^\s*object has no attribute\s*$", r"unexpected keyword argument\s*$",
               r"^\s*takes \d+ positional arguments?", r"^\s*module\s*has no attribute\s*$"),
     "Python's own wording (NameError, AttributeError, TypeError): the interpreter says it of any code"),
    (None, _rx(r"because of the following error \(look up to see its traceback\)"),
     "a wrapper around the error that follows it (the wrapped error, on the lines after, is the cause)"),
    (None, _rx(r"\bpy-cpuinfo\b", r"\blscpu\b", r"\bcores?\b.*\b(?:socket|instance)"), "CPU topology detection"),
    (None, _rx(r"\btokenizer\b"), "tokenizer loading"),
    (None, _rx(r"\bdownload", r"\boffline\b", r"\bHTTP\b", r"\bconnection\b", r"\burl\b", r"could not fetch",
               r"\bthe Hub\b", r"\bnetwork\b"),
     "a download or the network (the corpus counts these as unrelated to the stack)"),
    (None, _rx(r"Failed to (?:clean up|copy kernel files)", r"metadata\.jsonl", r"inputs\.pt nor", r"Fetch failed",
               r"Max retries reached"),
     "a library's cache and artefact download housekeeping"),
    (None, _rx(r"RNN backward can only be called in training mode"),
     "a recurrent layer's backward with the model in eval mode: the training loop's mode, not a kernel's limit"),
    (None, _rx(r"^module '' has no attribute ''\.?$", r"^'' object has no attribute ''\.?$"),
     "Python's own wording for a missing attribute of any module or object (a module's __getattr__): "
     "the names, not the site, would say whose"),
    (None, _rx(r"Cannot re-initialize CUDA in forked subprocess"),
     "the caller's multiprocessing: a process forked after its parent started CUDA (the 'spawn' start method "
     "fixes it), whatever the stack's releases"),
    (None, _rx(r"^batch size must be posi?tive\b"),
     "an empty batch (a filter, a packing or a dynamic batch size left no sequences): the caller's data, not a kernel's limit"),
    (None, _rx(r"^hidden_size\b[^a-z]{0,8}must be divisible by num_heads\b"),
     "a model config whose hidden size its head count does not divide (a pruned or edited config): the model's, "
     "whatever attention runs it"),
]


def out_of_stack(site):
    msg = literal(site)
    for path_rx, msg_rx, why in OUT_OF_STACK:
        if path_rx is not None and not path_rx.search(site.get("file") or ""):
            continue
        if msg_rx is not None and not msg_rx.search(msg):
            continue
        return why
    return None


_STATUS_PREFIX = re.compile(r"(?i)\b(?:cuda|cudnn|cublas\w*|hip\w*|nccl|cutlass|driver api|xpu|[\w-]+ library load)?\s*(?:error|failure|failed)"
                            r"(?:\s*(?:code|status))?[\s:()\[\]@,.-]*")


def _prefix_only(msg: str) -> bool:
    """A message whose words are only "CUDA error: " (or "<library> library load error: ") before a
    value: the value (the library's own status text, the loader's error) carries the cause, and no
    family can be read from the site."""
    return len(_STATUS_PREFIX.sub("", msg).strip(" :()[]@,.-\n")) < MIN_LITERAL


def literal(site) -> str:
    return "".join(p for p in site.get("parts") or [])


def _kind_keys(site):
    kind = site.get("kind") or ""
    exc = (site.get("exception") or "").rsplit(".", 1)[-1]
    keys = {kind, "%s:%s" % (kind, exc), "raise:%s" % exc if kind in ("raise", "check", "throw") else ""}
    if kind == "log" and exc in ("INFO", "DEBUG"):
        keys.add("log:INFO")
    if kind == "error" and exc.startswith("#error"):
        keys.add("error:#error (compile time)")
    if kind in ("warn",) or exc.endswith("Warning"):
        keys.add("warn")
    return keys


# Sites whose function says what they are, whatever their words: (file, function, kinds, family, rule).
BY_FUNCTION = [
    # torch's cuDNN attention (SDPA's cuDNN backend): its checks without a message are the cuDNN graph
    # failing to build or run, whatever the condition says
    (re.compile(r"^aten/src/ATen/native/cudnn/MHA\.cpp$"), re.compile(r"."), ("check",), "cudnn-sdpa", "AD255"),
    # DeepSpeed's op builders ask, at every import and in ds_report, whether each optional op could be
    # built here, and warn for those that could not (sparse_attn's torch range, an untested triton, an
    # older GPU): a notice; a job that uses such an op fails later with the op's own error
    # (and its helpers: the libaio package probe it calls, and the architecture-list filter the build
    # step calls, which warns of the architectures it leaves out)
    (re.compile(r"^op_builder/"), re.compile(r"\.(?:is_compatible|check_for_\w+|filter_ccs)$"), ("log:WARNING", "warn"), "harmless", "AD664"),
]


# torch's general tensor ops (aten/src/ATen/native beyond its attention, cuDNN, cuBLAS and autocast
# files): their checks of their own arguments (a shape, a device, a layout, an integer or quantized
# dtype) are the model's code or data; of their words only a precision the dtype judge reads (two
# dtypes that differ) and a GPU's architecture speak of the stack; their warnings reach users behind
# "(Triggered internally at ...)", which a rule of its own reads
_TORCH_GENERAL_OPS = re.compile(
    r"^aten/src/ATen/native/(?!transformers/|cudnn/|mps/operations/Attention\.mm$|cpu/FlashAttentionKernel\.cpp$|"
    r"Linear\.cpp$|LinearAlgebra\.cpp$|cuda/Blas\.cpp$|cuda/AmpKernels\.cu$|AmpKernels\.)")
_GENERAL_OPS_KEPT = {"autocast-scope", "kernel-gpu-unsupported"}
_DTYPE_PAIR = re.compile(r"(?i)^(?!.*\b(?:u?int\d*|long|for index)\b).*\b(?:dtypes? (?:to )?match|(?:expected|same) (?:scalar )?(?:type|dtype)s?)\b.*\b(?:got|found|but)\b")


def _general_op(site) -> bool:
    return (site.get("library") == "torch" and site.get("source") == "cpp"
            and bool(_TORCH_GENERAL_OPS.match(site.get("file") or "")))


def classify(site, named=None):
    """(family, rule, the test that decided) of one site. `named`: the rule explain's own signatures
    already name for the site's text (they are curated for that message: they win)."""
    family, rule, how = _classify(site, named)
    if not _general_op(site) or family.startswith(("rule:", "out:")) or family in _GENERAL_OPS_KEPT:
        return family, rule, how
    if family == "harmless":
        return ("out:a general tensor op's warning: torch prints it with '(Triggered internally at ...)', which its own "
                "rule reads", None, "out of the stack")
    if family == "kernel-dtype" and len(site.get("placeholders") or []) >= 2 and _DTYPE_PAIR.search(literal(site)):
        return "autocast-scope", "AD651", "two dtypes"  # the dtype judge reads the pair: a half type, or the caller's data
    return ("out:a general tensor op's check of its own arguments (shape, device, layout, an integer or quantized "
            "dtype): the model's code or data", None, "out of the stack")


def _classify(site, named=None):
    if named:
        return "rule:" + named, named, "signature"
    if _prefix_only(literal(site)):
        return "out:a prefix before a status text: the cause is in the value, which the rules read", None, "out of the stack"
    why = out_of_stack(site)
    if why:
        return "out:" + why, None, "out of the stack"
    msg = literal(site)
    cond = site.get("condition") or ""
    keys = _kind_keys(site)
    for file_rx, function_rx, kinds, family, rule in BY_FUNCTION:
        if keys & set(kinds) and file_rx.search(site.get("file") or "") and function_rx.search(site.get("function") or ""):
            return family, rule, "function"
    for family, rule, msg_rx, cond_rx, kinds, *only in FAMILIES:
        if only and only[0] is not None and not keys & set(only[0]):
            continue
        if len(only) > 1 and not only[1].search(site.get("file") or ""):
            continue
        if kinds is not None and keys & set(kinds):
            return _said_and_went_on(site, family, rule, "kind")
        if msg_rx is not None and msg_rx.search(msg):
            return _said_and_went_on(site, family, rule, "message")
        if cond_rx is not None and cond and cond_rx.search(cond):
            return _said_and_went_on(site, family, rule, "condition")
    return "unclassified", None, ""


# Families of a call refused (its arguments, an option the kernel has no path for, a framework's
# setting, an internal check, a serving backend lacking a feature): a warning or info line of those words refused nothing, the library
# said what it did instead ("output_attentions is set to False", "will have no effect", "using the
# default") and went on: a notice.
REFUSALS = {"AD281", "AD282", "AD283", "AD284", "AD286"}


def _said_and_went_on(site, family, rule, how):
    if rule in REFUSALS and site.get("kind") in NOTICE_KINDS and NOTICE_LEVELS.match(site.get("exception") or ""):
        return "harmless", "AD656", how
    return family, rule, how


# the shortest line of a message of several lines that is known on its own
LINE_MIN = 24
# a line of code, a command or an address inside a message: no words of a cause
_CODE = re.compile(r"^\s*(?:!|\$|>>>|from\s+\w|import\s|def\s|class\s|@\w)|\b(?:pip|conda|uv|apt|apt-get)\s+install\b"
                   r"|https?://|\w+\.\w+\([^)]*\)\s*[:;]?\s*$|^\s*\w+\s*=\s*\S", re.I)
# a line of advice in a message (what to run, where to look) names no cause on its own
_HINT = re.compile(r"^\s*(?:you (?:can|may|might|should|could|need)|please|try|consider|to (?:fix|install|update|use|"
                   r"enable|disable)|run|pip|uv|conda|if|see|for more|visit|check|make sure|note|otherwise|"
                   r"alternatively|or\b|then|in this case|refer)\b", re.I)


def _lines(parts):
    """A message's literal parts cut at its line breaks: one parts list per line (a placeholder
    between two parts stays between them). The first line is the message's own start."""
    lines, current = [], [""]
    for i, part in enumerate(parts):
        if i:
            current.append("")
        pieces = part.split("\n")
        current[-1] += pieces[0]
        for piece in pieces[1:]:
            lines.append(current)
            current = [piece]
    lines.append(current)
    return [[p.strip() if len(line) == 1 else p for p in line] for line in lines]


# A library's warning or info line (warnings.warn, a logger's warning or info) whose subject is not the
# stack still says only what the library does and goes on: a paste of it alone is a notice, not a
# failure. Shipped as the library-notice reading (AD656), unless it tells of a symptom of its own.
NOTICE_KINDS = {"warn", "log"}
NOTICE_LEVELS = re.compile(r"^(?:WARNING|INFO|\w*Warning)$")
NOTICE_MIN = 24  # literal characters: shorter warnings ("Unused kwargs: {}") are any program's words


def notice_entries(sites, known, recipes, named):
    """{(parts, "harmless"): entry} for the out-of-scope warning sites not already known, nor read by
    a rule's signature as a cause (named(site): that rule; "CUDA extension not installed." is a
    warning that says a kernel is missing). A warning only a harmless rule reads (a notice of
    torch's own, a deprecation) is kept: its words alone are read the same way."""
    symptom = re.compile("|".join("(?:%s)" % p for p in recipes.data["notices_only"]["symptom"]))
    harmless = {r.id for r in recipes.rules if r.cause == "harmless"}
    out = {}
    for site in sites:
        if site.get("scope") == "in" or site.get("kind") not in NOTICE_KINDS or _general_op(site):
            continue
        if not NOTICE_LEVELS.match(site.get("exception") or "") or not site.get("parts"):
            continue
        text = literal(site)
        if len(text.strip()) < NOTICE_MIN or symptom.search(text):
            continue
        parts = tuple(site["parts"])
        if parts in known or (parts, "harmless") not in out and named(site) not in (None, *harmless):
            continue
        e = out.setdefault((parts, "harmless"), {"parts": list(parts), "family": "harmless", "rule": "AD656",
                                                 "exception": site.get("exception"), "kind": site.get("kind"), "at": []})
        if len(e["at"]) < 4:
            e["at"].append("%s %s %s:%s" % (site["library"], site.get("version") or "", site.get("file"), site.get("line")))
    return out


# TORCH_CHECK(cond) with no message prints "Expected <cond> to be true, but got false." (the condition as
# written: the macro stringises it), then its "(Could this error message be improved? ...)" advice.
UNWORDED_CALLS = {"TORCH_CHECK", "STD_TORCH_CHECK"}
UNWORDED = "Expected %s to be true, but got false."


def unworded_entries(sites, known):
    """{(parts, family): entry} for C++ checks without a message in a place the stack's scope covers
    (their location: an attention kernel's file or function), each known by the words torch prints,
    with the family its condition and place give; a condition no family reads is left out."""
    out = {}
    for site in sites:
        if site.get("source") != "cpp" or site.get("parts") or site.get("call") not in UNWORDED_CALLS or _general_op(site):
            continue
        cond = " ".join((site.get("condition") or "").split())
        if site.get("location_scope") != "in" or len(cond) < MIN_LITERAL:
            continue
        parts = [UNWORDED % cond]
        family, rule, _ = classify({**site, "parts": parts})
        if rule is None or (tuple(parts), family) in out or tuple(parts) in known:
            continue
        out[(tuple(parts), family)] = {"parts": parts, "family": family, "rule": rule, "exception": "RuntimeError",
                                       "kind": "check", "at": ["%s %s %s:%s" % (site["library"], site.get("version") or "",
                                                                              site.get("file"), site.get("line"))]}
    return out


def python_said(entries):
    """The entries a message of Python itself is read as: the library re-raises Python's words."""
    from attn_doctor.explaining.catalogue import Catalogue, Entry, _norm

    key_of = {}  # an entry as explain reads it -> its key here ((parts, family) makes each one distinct)
    for key, e in entries.items():
        parts = tuple(_norm(p) for p in e["parts"])
        key_of[Entry(parts=parts, family=key[1], rule=e["rule"], at=(), literal=sum(len(p) for p in parts))] = key
    said: set = set()
    lines = python_messages.lines()
    while True:  # a line reads its best entry only: drop it and read the line again, until none reads it
        catalogue = Catalogue([e for e, key in key_of.items() if e.literal >= MIN_LITERAL and key not in said])
        found = {key_of[hit.entry] for line in lines if (hit := catalogue.match(line)) is not None
                 and hit.complete and hit.entry.family != "harmless"}
        if not found:
            return said
        said |= found


def load(paths):
    for path in paths:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    yield json.loads(line)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sample", type=int, default=0, help="print this many random sites per family (to audit)")
    ap.add_argument("--unclassified", type=int, default=0, help="print this many unclassified sites")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(HERE))
    import io

    from coverage import text_of
    from attn_doctor.explaining.core import explain
    from attn_doctor.rules.loader import load_recipes

    recipes = load_recipes()
    signature_rules = {r.id for r in recipes.rules if r.signatures}
    seen = {}

    from attn_doctor.explaining.core import _scanner, frame_readings

    scanner = _scanner(recipes, False)[1]

    def named(site):
        text = text_of(site)
        if text not in seen:
            report = explain(io.BytesIO(text.encode("utf-8")), recipes, kind="text")
            # a reading of who raised it (any error in Triton's frames) says nothing of this message
            by_frame = frame_readings(scanner.scan(io.BytesIO(text.encode("utf-8")), keep_all_lines=True))
            first = next((m for m in report.matches if m.likelihood != "unlikely" and m.rule in signature_rules
                          and m.resembles is None and m.site is None and m.rule not in by_frame), None)
            seen[text] = first.rule if first is not None else None
        return seen[text]

    per_lib = collections.defaultdict(collections.Counter)
    by_family = collections.defaultdict(list)
    entries = {}
    # messages torch raises out of the stack's scope (a user's shapes): another library's copy of the
    # same words says no more of its cause than torch's does, and the text does not say which raised it
    torch_out, torch_in = set(), set()
    out_of_scope = []  # the notices are chosen among these once the in-scope entries are known
    for site in load(sorted(SITES.glob("*.jsonl.gz"))):
        lib = site["library"] + ("-cpp" if site.get("source") == "cpp" else "")
        if site["library"] == "torch" and site.get("parts"):
            (torch_in if site.get("scope") == "in" else torch_out).add(tuple(site["parts"]))
        if site.get("scope") != "in":
            out_of_scope.append(site)
            continue
        per_lib[lib]["in"] += 1
        if len(literal(site).strip()) < MIN_LITERAL:
            per_lib[lib]["short"] += 1
            continue
        family, rule, how = classify(site, named(site))
        per_lib[lib][family if family in ("unclassified",) or family.startswith("out:") else "classified"] += 1
        by_family[family].append((site, how))
        if rule is None:
            continue
        if how == "condition" and len(literal(site).strip()) < CONDITION_MIN:
            per_lib[lib]["classified"] -= 1
            per_lib[lib]["out:words"] += 1
            continue  # "Not implemented" over a head-dim check: the words alone would be matched anywhere
        parts = [p for p in site.get("parts") or []]
        key = (tuple(parts), family)
        e = entries.setdefault(key, {"parts": parts, "family": family, "rule": rule, "exception":
                                     (site.get("exception") or "").rsplit(".", 1)[-1], "kind": site.get("kind"), "at": []})
        at = "%s %s %s:%s" % (site["library"], site.get("version") or "", site.get("file"), site.get("line"))
        if len(e["at"]) < 4:
            e["at"].append(at)
        # a message of several lines is also known by each of its lines that says the same cause in
        # its own words: a paste holds that line without the banner around it. Not its advice, code
        # or commands, nor a line whose family only the message's other lines gave.
        for line_parts in _lines(parts)[1:] if "\n" in "".join(parts) else ():
            words = "".join(line_parts)
            if len(words.strip()) < LINE_MIN or _HINT.match(words) or _CODE.search(words):
                continue
            if classify({**site, "parts": line_parts, "condition": ""})[:2] != (family, rule):
                continue
            sub = entries.setdefault((tuple(line_parts), family), {
                "parts": line_parts, "family": family, "rule": rule, "exception": e["exception"], "kind": e["kind"], "at": []})
            if len(sub["at"]) < 4 and at not in sub["at"]:
                sub["at"].append(at)
    head = "%-20s %6s %6s %6s %6s %6s %8s" % ("library", "in", "short", "famly", "out", "uncls", "covered")
    print(head)
    tot = collections.Counter()
    for lib in sorted(per_lib):
        c = per_lib[lib]
        tot.update(c)
        outs = sum(v for k, v in c.items() if k.startswith("out:"))
        judged = c["in"] - c["short"]
        print("%-20s %6d %6d %6d %6d %6d %7.1f%%" % (lib, c["in"], c["short"], c["classified"], outs, c["unclassified"],
                                                   100.0 * (judged - c["unclassified"]) / judged if judged else 0))
    judged = tot["in"] - tot["short"]
    print("%-20s %6d %6d %6d %6d %6d %7.1f%%" % ("all", tot["in"], tot["short"], tot["classified"],
                                               sum(v for k, v in tot.items() if k.startswith("out:")), tot["unclassified"],
                                               100.0 * (judged - tot["unclassified"]) / judged))
    print()
    for fam in sorted(by_family, key=lambda f: -len(by_family[f])):
        hows = collections.Counter(h for _, h in by_family[fam])
        print("%-32s %6d  %s" % (fam, len(by_family[fam]), dict(hows)))
    rnd = random.Random(args.seed)
    if args.sample:
        for fam in sorted(by_family):
            if fam == "unclassified":
                continue
            print("\n== %s" % fam)
            for site, how in rnd.sample(by_family[fam], min(args.sample, len(by_family[fam]))):
                print("  [%s] %s | %s" % (how, literal(site)[:140].replace("\n", " "), (site.get("condition") or "")[:60]))
    if args.unclassified:
        print("\n== unclassified")
        for site, how in rnd.sample(by_family["unclassified"], min(args.unclassified, len(by_family["unclassified"]))):
            print("  %s %s %s %s | %s | %s" % (site["library"], site.get("file"), site.get("kind"), site.get("exception"),
                                            literal(site)[:140].replace("\n", " "), (site.get("condition") or "")[:60]))
    unworded = unworded_entries(out_of_scope, {key[0] for key in entries})
    entries.update(unworded)
    print("%d checks without a message shipped with the words TORCH_CHECK prints for them" % len(unworded))
    shared = [key for key in entries if key[0] in torch_out and key[0] not in torch_in]
    for key in shared:
        del entries[key]
    print("%d messages dropped: another library's copy of a message torch raises out of scope" % len(shared))
    python_own = python_said(entries)
    for key in python_own:
        del entries[key]
    print("%d messages dropped: Python's own words (%s), which any program raises" % (len(python_own), python_messages.DATA.name))
    notices = notice_entries(out_of_scope, {key[0] for key in entries}, recipes, named)
    entries.update(notices)
    print("%d warnings out of the stack's scope shipped as library notices (AD656)" % len(notices))
    if not args.no_write:
        rows = sorted(entries.values(), key=lambda e: (e["family"], e["parts"]))
        with gzip.GzipFile(args.out, "wb", mtime=0) as fh:
            for e in rows:
                fh.write((json.dumps(e, separators=(",", ":"), sort_keys=True) + "\n").encode("utf-8"))
        print("\nwrote %d entries to %s" % (len(rows), args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
