#!/bin/bash
# Reference solution: paths the account can write (/tmp), no "user=root" (a non-root supervisord
# cannot switch user and refuses to start), the rpcinterface section supervisorctl needs, the
# python3 interpreter ("python" does not exist here) and autorestart=true (a recycle exits 0,
# which "unexpected" does not restart).
set -e
cat > /app/supervisor/supervisord.conf <<'CONF'
; supervisord for the heartbeat worker. Started as the service account with:
;   python3 -m supervisor.supervisord -c /app/supervisor/supervisord.conf

[unix_http_server]
file=/tmp/supervisor.sock
chmod=0700

[rpcinterface:supervisor]
supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface

[supervisord]
logfile=/tmp/supervisord.log
pidfile=/tmp/supervisord.pid
childlogdir=/tmp
nodaemon=true

[supervisorctl]
serverurl=unix:///tmp/supervisor.sock

[program:heartbeat]
command=python3 /app/worker/heartbeat.py
directory=/app/worker
autostart=true
autorestart=true
startsecs=1
startretries=3
stdout_logfile=/tmp/heartbeat.log
redirect_stderr=true
CONF
