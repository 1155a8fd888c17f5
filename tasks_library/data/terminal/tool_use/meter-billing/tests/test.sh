#!/bin/bash
# Verifier: the pytest checks beside this file; reward 1 only when every check passes.
# Runs from a fresh directory with python's -s -P so nothing the agent left in /app or $HOME
# (a pytest.ini, a conftest.py, a module shadowing pytest) is imported.
mkdir -p /logs/verifier
work=$(mktemp -d)
cd "$work" || exit 1
PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -s -P -m pytest -q -p no:cacheprovider \
  --rootdir=/tests -c /dev/null /tests/test_state.py
if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
