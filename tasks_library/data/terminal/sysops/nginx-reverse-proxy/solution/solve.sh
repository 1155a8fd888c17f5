#!/bin/bash
# Reference solution: the missing semicolon, the upstream's real port (9100, README), a trailing
# slash on proxy_pass so that /api/ is replaced by /, and the header value the API requires.
set -e
conf=/app/gateway/nginx.conf
sed -i \
  -e 's|server 127.0.0.1:9010;|server 127.0.0.1:9100;|' \
  -e 's|proxy_pass http://inventory;|proxy_pass http://inventory/;|' \
  -e 's|proxy_set_header Host $host$|proxy_set_header Host $host;|' \
  -e 's|X-Request-Source gatway;|X-Request-Source gateway;|' \
  "$conf"
nginx -t -c "$conf"
