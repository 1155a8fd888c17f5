#!/bin/bash
# Reference solution: 20-render-config has Windows line endings (its "#!/bin/sh\r" interpreter
# does not exist); 30-migrate.sh is skipped by run-parts for the dot in its name; 40-warm-cache
# has no "#!" line and is not executable; 90-reset-database must not be executable.
set -e
cd /app/deploy/hooks.d
sed -i 's/\r$//' 20-render-config
mv 30-migrate.sh 30-migrate
sed -i '1i #!/bin/sh' 40-warm-cache
chmod 755 10-check-env 20-render-config 30-migrate 40-warm-cache 50-notify
chmod 644 90-reset-database README
run-parts --test /app/deploy/hooks.d
