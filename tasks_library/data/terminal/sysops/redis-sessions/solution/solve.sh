#!/bin/bash
# Reference solution: the runbook's port, writable log/pid paths, the snapshot's directory and
# file name, the 15-minute save rule, a valid eviction policy and the password from the secret.
set -e
conf=/app/redis/redis.conf
secret=$(head -n1 /srv/redis/secret)
sed -i \
  -e 's|^port 6379$|port 6390|' \
  -e 's|^bind 127.0.0.1 -::1$|bind 127.0.0.1|' \
  -e 's|^pidfile .*|pidfile /tmp/redis-sessions.pid|' \
  -e 's|^logfile .*|logfile /tmp/redis-sessions.log|' \
  -e 's|^save 3600 1$|save 900 1|' \
  -e 's|^dbfilename dump.rdb$|dbfilename sessions.rdb|' \
  -e 's|^dir /var/lib/redis$|dir /srv/redis|' \
  -e 's|^maxmemory-policy allkeys_lru$|maxmemory-policy allkeys-lru|' \
  -e "s|^# requirepass changeme\$|requirepass $secret|" \
  "$conf"
grep -q "^requirepass $secret\$" "$conf"
