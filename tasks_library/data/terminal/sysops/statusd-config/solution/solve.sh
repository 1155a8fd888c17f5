#!/bin/bash
# Reference solution: valid TOML (a quoted address, an integer port, the missing comma in the
# pipelines array) and the database's real path from the README.
set -e
cat > /app/statusd/statusd.toml <<'TOML'
# statusd configuration (read once at start: python3 /app/statusd/statusd.py)

[server]
bind = "127.0.0.1"
port = 8090

[storage]
database = "/srv/statusd/builds.sqlite3"
pipelines = ["api", "web", "worker", "docs"]

[auth]
token_file = "/srv/statusd/secrets/api-token"
TOML
python3 -c 'import tomllib; tomllib.load(open("/app/statusd/statusd.toml", "rb"))'
