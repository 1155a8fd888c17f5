#!/bin/bash
# Reference solution: the two daemon logs named (the glob also took audit.log), a numeric rotate
# count, copytruncate (the daemon never reopens its files; "create" with root:adm also needs
# root), delaycompress for the plain .1, notifempty, the closing brace, and no systemctl script.
set -e
cat > /app/logrotate/ingest.conf <<'CONF'
# Rotation of the ingest service's logs. Run once a day by the ops scheduler, as the service
# account:  logrotate -s /srv/logs/.logrotate.state /app/logrotate/ingest.conf
/srv/logs/ingest/ingest.log /srv/logs/ingest/ingest-errors.log {
    daily
    rotate 5
    copytruncate
    compress
    delaycompress
    notifempty
    missingok
}
CONF
logrotate -d -s /tmp/logrotate.state /app/logrotate/ingest.conf
