#!/bin/bash
# Reference solution: a pid file the account can write, the include's real directory, the
# missing ";" after root, one default server only, the app's fallback (not for /static/), and a
# permanent redirect that keeps the path and query.
set -e
cd /app/nginx
sed -i -e 's|^pid /run/nginx.pid;|pid /tmp/nginx-vhosts.pid;|' \
       -e 's|include /app/nginx/site/\*.conf;|include /app/nginx/sites/*.conf;|' nginx.conf
cat > sites/shop.conf <<'CONF'
# The shop's single-page app.
server {
    listen 127.0.0.1:8088;
    server_name shop.internal;
    root /srv/www/shop;

    location / {
        index index.html;
        try_files $uri $uri/ /index.html;
    }

    location /static/ {
        expires 7d;
        try_files $uri =404;
    }
}
CONF
cat > sites/legacy.conf <<'CONF'
# The old shop host name: everything moved to shop.internal.
server {
    listen 127.0.0.1:8088;
    server_name legacy.internal www.legacy.internal;
    return 301 http://shop.internal:8088$request_uri;
}
CONF
nginx -t -c /app/nginx/nginx.conf
