#!/bin/bash
# Reference solution: walk the volume, delete the files whose name is a rotated log's and that no
# legal-hold pattern matches (names may hold spaces: no word splitting anywhere).
set -euo pipefail
python3 - <<'PY'
import fnmatch, os, re
ROOT = "/srv/app-logs"
ROTATED = re.compile(r"(.+\.log\.\d+(\.gz)?|.+\.log-\d{8}(\.gz)?|.+-\d{4}-\d{2}-\d{2}\.log\.gz)")
keep = []
for line in open("/app/cleanup/KEEP"):
    line = line.split("#", 1)[0].strip()
    if line:
        keep.append(line)
for dirpath, _dirs, names in os.walk(ROOT):
    for name in names:
        rel = os.path.relpath(os.path.join(dirpath, name), ROOT)
        if ROTATED.fullmatch(name) and not any(fnmatch.fnmatchcase(rel, p) for p in keep):
            os.remove(os.path.join(ROOT, rel))
PY
/app/cleanup/usage | grep -q ': OK$'
