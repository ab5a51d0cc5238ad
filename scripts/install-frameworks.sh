#!/usr/bin/env bash
# Agent frameworks that need the openai client's next major version (the OpenAI Agents SDK,
# pydantic-ai), in a virtual environment of their own beside toolgym's: build/frameworks.
# Their example agents run from it as harness commands; the gateway is all they share with
# toolgym. Idempotent.
set -euo pipefail
PYTHON="${PYTHON:-python3}"
VENV="${FRAMEWORKS_VENV:-build/frameworks}"
PACKAGES=("openai-agents>=0.24,<0.25" "pydantic-ai-slim[openai]>=2.68,<3")

if "$VENV/bin/python" -c 'import agents, pydantic_ai' 2>/dev/null; then
  exit 0
fi
"$PYTHON" -m venv --without-pip --clear "$VENV"
"$PYTHON" -m pip --python "$VENV/bin/python" install --quiet "${PACKAGES[@]}"
"$VENV/bin/python" -c 'import agents, pydantic_ai' \
  || { echo "the agent frameworks do not import in $VENV after the install" >&2; exit 1; }
