#!/usr/bin/env bash
# The Python sites of older releases of the stack's libraries (what users on an older torch,
# transformers or triton are shown): each release downloaded from PyPI (no dependencies), the files
# of extract_python.py's prefixes for that library taken out of it, and extracted into
# sites/<library>-<version>.jsonl.gz. Usage: [ONLY=LIBRARY] benchmarks/catalogue/old_releases.sh [WORKDIR]
# (ONLY=torch redoes torch's releases alone)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
PY="${PYTHON:-python3}"
W="${1:-/tmp/catalogue_old}"
mkdir -p "$W"
TORCH_PREFIX="torch/nn torch/amp torch/cuda torch/backends torch/mps torch/_inductor/kernel torch/_inductor/lowering.py torch/_inductor/select_algorithm.py torch/_inductor/codegen/triton.py torch/_dynamo/exc.py torch/_dynamo/eval_frame.py torch/_dynamo/convert_frame.py torch/utils/cpp_extension.py torch/utils/_triton.py torch/_higher_order_ops/flex_attention.py torch/distributed/fsdp/api.py torch/distributed/fsdp/sharded_grad_scaler.py torch/_prims_common torch/_meta_registrations.py torch/_decomp/decompositions.py"
TRITON_PREFIX="triton/compiler triton/runtime triton/backends triton/language/semantic.py triton/language/core.py"
TF_PREFIX="transformers/integrations transformers/modeling_utils.py transformers/modeling_flash_attention_utils.py transformers/utils/import_utils.py transformers/training_args.py transformers/trainer.py transformers/cache_utils.py transformers/quantizers"
ACC_PREFIX="accelerate/accelerator.py accelerate/state.py accelerate/utils"
XF_PREFIX="xformers/ops xformers/_cpp_lib.py xformers/info.py"
FA_PREFIX="flash_attn"
TV_PREFIX="torchvision/extension.py torchvision/ops torchvision/io torchvision/_meta_registrations.py torchvision/transforms/functional_tensor.py torchvision/transforms/functional_pil.py torchvision/transforms/_functional_video.py torchvision/transforms/_transforms_video.py"

one() {  # library, pip requirement, version, prefixes...
  local lib=$1 req=$2 ver=$3; shift 3
  if [ -n "${ONLY:-}" ] && [ "$lib" != "$ONLY" ]; then return 0; fi
  local dir="$W/$lib-$ver"
  if [ ! -d "$dir/src" ]; then
    mkdir -p "$dir/dl" "$dir/src"
    # a wheel where there is one; flash-attn's sdist runs its setup.py to be downloaded: it needs
    # torch importable (this Python's) and no CUDA build
    "$PY" -m pip download --quiet --no-deps "$req" -d "$dir/dl" --python-version "${PYV:-3.11}" --platform "${PLAT:-manylinux2014_x86_64}" --only-binary :all: 2>/dev/null \
      || FLASH_ATTENTION_SKIP_CUDA_BUILD=TRUE "$PY" -m pip download --quiet --no-deps --no-binary :all: --no-build-isolation "$req" -d "$dir/dl"
    f=$(ls "$dir/dl"/* | head -1)
    case "$f" in
      *.whl) "$PY" - "$f" "$dir/src" "$@" <<'PYEOF'
import sys, zipfile
whl, out, prefixes = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(whl) as z:
    for n in z.namelist():
        if n.endswith(".py") and any(n == p or n.startswith(p.rstrip("/") + "/") for p in prefixes):
            z.extract(n, out)
PYEOF
      ;;
      *) tar -xzf "$f" -C "$dir/dl" && cp -r "$dir"/dl/*/flash_attn "$dir/src/" ;;
    esac
    rm -rf "$dir/dl"
  fi
  (cd "$HERE" && "$PY" extract_python.py --library "$lib" --version "$ver" --root "$dir/src" --prefix "$@" \
     --out "sites/$lib-$ver.jsonl" && gzip -n -9 -f "sites/$lib-$ver.jsonl")
}

# torch 1.x has no wheel for Python 3.11; only a wheel's .py files are read, so its small macOS wheels serve
PYV=3.8 PLAT=macosx_10_9_x86_64 one torch torch==1.7.1 1.7.1 $TORCH_PREFIX
PYV=3.9 PLAT=macosx_11_0_arm64 one torch torch==1.10.2 1.10.2 $TORCH_PREFIX
PYV=3.10 PLAT=macosx_11_0_arm64 one torch torch==1.13.1 1.13.1 $TORCH_PREFIX
one torch torch==2.0.1 2.0.1 $TORCH_PREFIX
one torch torch==2.3.1 2.3.1 $TORCH_PREFIX
one torch torch==2.5.1 2.5.1 $TORCH_PREFIX
one triton triton==2.1.0 2.1.0 $TRITON_PREFIX
one triton triton==3.0.0 3.0.0 $TRITON_PREFIX
one transformers transformers==4.36.2 4.36.2 $TF_PREFIX
one transformers transformers==4.43.4 4.43.4 $TF_PREFIX
one transformers transformers==4.48.3 4.48.3 $TF_PREFIX
one accelerate accelerate==0.28.0 0.28.0 $ACC_PREFIX
one xformers xformers==0.0.26.post1 0.0.26.post1 $XF_PREFIX
one flash-attn flash-attn==2.5.9.post1 2.5.9.post1 $FA_PREFIX
one torchvision torchvision==0.15.2 0.15.2 $TV_PREFIX
