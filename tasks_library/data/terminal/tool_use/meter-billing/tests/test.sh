#!/bin/bash
# Verifier: the pytest checks beside this file; reward 1 only when every check passes.
# pytest runs from a fresh directory with python's -s -P, so nothing the agent left in /app or
# $HOME (a pytest.ini, a conftest.py, a module shadowing pytest) is imported.
mkdir -p /logs/verifier
work=$(mktemp -d)
cd "$work" || exit 1
PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -s -P -m pytest -q -p no:cacheprovider \
  --rootdir=/tests -c /dev/null /tests/test_state.py
status=$?
# The checks ran the task's own services and, where that is the task, the agent's scripts and
# configuration: stop every other process of this account (not this script nor its ancestors)
# before writing the reward, so that nothing left running can write it after this script does.
/usr/bin/python3 -I -S - <<'PY'
import os, signal
uid, keep, pid = os.getuid(), {1}, os.getpid()
while pid > 1:  # this process and its ancestors
    keep.add(pid)
    with open(f"/proc/{pid}/stat") as f:
        pid = int(f.read().rsplit(")", 1)[1].split()[1])
for _ in range(50):
    victims = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in keep:
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            if os.stat(f"/proc/{name}").st_uid == uid and state not in "ZX":
                victims.append(int(name))
        except OSError:
            pass
    if not victims:
        break
    for victim in victims:
        try:
            os.kill(victim, signal.SIGKILL)
        except OSError:
            pass
PY
rm -rf /logs/verifier/reward.txt
if [ $status -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
