#!/bin/bash
# Reference solution: listen on 127.0.0.1:8080 (port 80 needs root), a pid file the service
# account can write, the real document root, and the asset location's real path.
set -e
conf=/etc/nginx/nginx.conf
sed -i \
  -e 's|^pid /run/nginx.pid;|pid /tmp/nginx.pid;|' \
  -e 's|listen 80;|listen 127.0.0.1:8080;|' \
  -e 's|root /var/www/docs;|root /srv/docs/public;|' \
  -e 's|location /asset/ {|location /assets/ {|' \
  "$conf"
nginx -t -c "$conf"
