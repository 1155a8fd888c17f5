#!/bin/bash
# 30-migrate: apply the release's schema migrations to the application database.
set -euo pipefail
sqlite3 -bail "$RELEASE_DIR/data/app.db" < "$RELEASE_DIR/migrations.sql"
echo "30-migrate ok" >> "$RELEASE_DIR/deploy.log"
