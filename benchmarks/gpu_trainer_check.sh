#!/usr/bin/env bash
# Trainer throughput on a GPU box: Crucible's GRPO step against TRL's GRPOTrainer with a
# bigger model than the CPU default (GPT-2 small shape: 12 layers, 768 wide), bigger
# batches and longer completions. bf16 on GPUs that support it. Prints one JSON object
# (see benchmarks/trainer_throughput.py); about 3 to 5 minutes on one H100/H200.
#
# Run from anywhere: bash benchmarks/gpu_trainer_check.sh [extra trainer_throughput.py options]
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
"$PYTHON" -c 'import torch; assert torch.cuda.is_available(), "no CUDA device visible to torch"'
exec "$PYTHON" benchmarks/trainer_throughput.py \
    --device cuda --threads 4 \
    --n-embd 768 --n-layer 12 --n-head 12 --vocab-size 8192 \
    --prompts 16 --group-size 8 --max-new-tokens 256 \
    --steps 3 --rounds 1 "$@"
