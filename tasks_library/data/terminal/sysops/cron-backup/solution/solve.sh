#!/bin/bash
# Reference solution. Crontab: five time fields on the backup line (it had six, so cron would run
# "*" as the command), and "%" escaped in the prune line (cron turns a bare "%" into a newline).
# backup-orders: the shebang on the first line (it was on the second, so the file was not an
# executable script), the database's real name, the README's date format, failure on error.
# prune-backups: newest by the date in the name (the files' mtimes say nothing), keep 7 (not 6),
# and only the nightly backups' names (the year-end archives matched the old glob).
set -e
cat > /app/cron/backup.crontab <<'CRON'
# crontab of the service account (installed with: crontab /app/cron/backup.crontab)
SHELL=/bin/sh
PATH=/usr/bin:/bin
MAILTO=""
# m  h  dom mon dow  command
# nightly backup of the orders database at 02:30
30 2 * * * /app/bin/backup-orders >> /srv/backups/backup.log 2>&1
# weekly retention, Sundays at 03:15
15 3 * * Sun /app/bin/prune-backups >> /srv/backups/prune-$(date +\%Y\%m).log 2>&1
CRON
cat > /app/bin/backup-orders <<'SH'
#!/bin/sh
# Nightly backup of the orders database (scheduled in /app/cron/backup.crontab).
set -eu
DB=/srv/orders/orders.db
OUT=/srv/backups/orders-$(date +%Y-%m-%d).db
rm -f "$OUT" "$OUT.gz"
sqlite3 -bail "file:$DB?mode=ro" ".backup '$OUT'"
test "$(sqlite3 "$OUT" 'PRAGMA integrity_check;')" = ok
gzip -f "$OUT"
SH
cat > /app/bin/prune-backups <<'SH'
#!/bin/sh
# Weekly retention of the nightly backups (scheduled in /app/cron/backup.crontab).
set -eu
cd /srv/backups
ls -1 | grep -E '^orders-[0-9]{4}-[0-9]{2}-[0-9]{2}\.db\.gz$' | sort -r | tail -n +8 |
  while read -r old; do rm -f -- "$old"; done
SH
chmod 755 /app/bin/backup-orders /app/bin/prune-backups
