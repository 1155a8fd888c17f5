#!/bin/bash
# Crucible verifier. pytest runs from /tests (read-only) with -P (the working directory is not
# put on sys.path, so a pytest.py or a module the agent leaves in /app cannot shadow one) and
# -s (no user site-packages): only the task's own files under /tests are executed.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
cd /tests || exit 0
if python3 -P -s -m pytest -q -p no:cacheprovider /tests/test_state.py; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
