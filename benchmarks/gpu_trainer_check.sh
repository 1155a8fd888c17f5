#!/usr/bin/env bash
# Trainer throughput on a GPU box: Crucible's GRPO step against TRL's GRPOTrainer with a
# bigger model than the CPU default (GPT-2 small shape: 12 layers, 768 wide), bigger
# batches and longer completions. bf16 on GPUs that support it. Prints one JSON object
# (see benchmarks/trainer_throughput.py); about 3 to 5 minutes on one H100/H200.
#
# --quick (what CI runs, on a machine without a GPU): the same command with the same options at
# tiny sizes, on the GPU where torch sees one, else on the CPU; seconds plus the imports. What
# needs a GPU (CUDA, bf16, the sizes) is checked only by the full run on a GPU box.
#
# Run from anywhere:
#   bash benchmarks/gpu_trainer_check.sh [--quick] [extra trainer_throughput.py options]
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
if [ "${1:-}" = --quick ]; then
  shift
  device=$("$PYTHON" -c 'import torch; print("cuda" if torch.cuda.is_available() else "cpu")')
  threads=1 sizes=(--n-embd 32 --n-layer 1 --n-head 2 --vocab-size 512
    --prompts 2 --group-size 2 --max-new-tokens 8 --steps 1 --rounds 1 --quick)
else
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
  "$PYTHON" -c 'import torch; assert torch.cuda.is_available(), "no CUDA device visible to torch"'
  device=cuda
  threads=4 sizes=(--n-embd 768 --n-layer 12 --n-head 12 --vocab-size 8192
    --prompts 16 --group-size 8 --max-new-tokens 256 --steps 3 --rounds 1)
fi
exec "$PYTHON" benchmarks/trainer_throughput.py --device "$device" --threads "$threads" \
    "${sizes[@]}" "$@"
