"""The root-cause classes a rule's `cause` names, in words. The recipe schema takes its list of
classes from this table (rules/model.py), so a class exists exactly when it has a label."""

CAUSES = {
    "build-mismatch": "an extension built for another torch or C++ ABI",
    "extension-missing": "a kernel library (flash-attn, xformers, mamba-ssm, ...) or its compiled CUDA extension is missing",
    "cuda-mismatch": "the wheel was built for another CUDA major than torch",
    "runtime-library": "a CUDA library (cuDNN, cuBLAS, NCCL) other than the one torch was built against is loaded first (LD_LIBRARY_PATH, the system's)",
    "glibc": "the wheel needs a newer glibc / libstdc++ than this OS has",
    "build-toolchain": "building an extension from source: the compiler toolchain (nvcc, CUDA_HOME, gcc) or pip's build isolation does not fit torch",
    "gpu-arch": "the GPU is too old or too new for the installed kernels",
    "torch-arch": "torch (or an extension) was built without this GPU's architecture",
    "driver": "the NVIDIA driver: none on the machine, its library (libcuda) not found, older than the CUDA torch was built with, or not ready on the node",
    "torch-build": "a torch build without CUDA where CUDA is wanted",
    "bf16-unsupported": "bf16 or TF32 (or fp16 before Volta) requested on a GPU without native support for it",
    "fp32-model": "a model loaded or computing in fp32 reaches a half-precision-only kernel",
    "dtype-promotion": "an implicit fp32 promotion inside the forward pass",
    "autocast-scope": "the forward runs outside autocast, or autocast was disabled",
    "autocast-refused": "an op that torch.autocast refuses rather than casts (binary_cross_entropy on probabilities) runs inside autocast",
    "half-weights-training": "fp16 weights trained with a GradScaler or optimizer that needs fp32 master weights",
    "version-pair": "two releases known not to work together",
    "api-skew": "a caller uses an API that the installed release of a library lacks or changed",
    "head-dim": "the head dimension is one the kernel does not take",
    "model-support": "the model's code in this release has no path for the requested attention implementation",
    "input-layout": "an attention input (q/k/v, their gradient, a mask or a bias) with a memory layout or dtype the kernel refuses",
    "device": "tensors on a device the kernel does not run them on: a GPU-only attention kernel given CPU tensors, a half-precision op on the CPU",
    "gpu-resources": "a kernel needs more shared memory than this GPU has",
    "triton-bf16": "Triton lacking or miscompiling bf16 for an op",
    "triton-compiler": "the Triton compiler fails on this kernel with this Triton release",
    "kernel-selection": "no kernel took the path the call asks for (SDPA or xformers found no fused kernel for these inputs; a serving engine or kernel library has none for this option, combination or platform)",
    "kernel-bug": "a known bug of one attention backend or torch release (fixed upstream)",
    "kernel-numerics": "an attention kernel that runs but computes wrong numbers (NaN gradients, a wrong output) at some shapes",
    "no-half-kernel": "an op (most often a custom extension's attention kernel) has no kernel for the low-precision dtype it is handed: float16 / bfloat16 from autocast or .half(), float8 weights used without a cast",
    "fp16-range": "float16 values overflow its range (max 65504) and turn into inf / NaN",
    "kernel-arguments": "the call passes a shape, size or value the kernel or library checks and refuses (a caller written for another release, a model configuration the kernel does not take, a bug in the calling code)",
    "library-internal": "an internal invariant of a library fails: a bug of the release, or inputs an earlier check let through",
    "cuda-call": "a CUDA library call (cuDNN, cuBLAS, CUTLASS, NVRTC, the runtime) returned an error status inside the kernel",
    "framework-setting": "a framework (accelerate, DeepSpeed, transformers, FSDP) refuses a precision, attention or parallelism setting",
    "build-feature": "the installed build of torch or a kernel library was compiled without the kernel, backend or architecture the call needs",
    "harmless": "a harmless message: nothing to fix",
}


def label(cause) -> str:
    return CAUSES.get(cause or "", "other")
