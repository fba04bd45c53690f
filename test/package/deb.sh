#!/usr/bin/env bash
# Debian package test, as a newcomer would use it: build postgresql-15-awa-shard with
# `dpkg-buildpackage -us -uc -b` in a copy of the tree, check what the .deb holds, remove the
# extension files a `make install` left, install the .deb with `dpkg -i`, run the standard
# `make installcheck` against a server without preload (the default of a Debian cluster),
# then `dpkg -r` the package and check that nothing of it is left. Run as root; servers run
# as the postgres user. Prints "package: N passed, M failed" (the installcheck tests count
# one each). Afterwards the extension is NOT installed: run `make install` again if needed
# (test/run does).
set -uo pipefail
tree="$(cd "$(dirname "$0")/../.." && pwd)"
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
pkg=postgresql-15-awa-shard
libdir=$("$PGBIN/pg_config" --pkglibdir); extdir="$("$PGBIN/pg_config" --sharedir)/extension"
passed=0; failed=0
check() { if [ "$2" = "$3" ]; then passed=$((passed+1)); else failed=$((failed+1)); echo "not ok - $1: expected '$3', got '$2'"; fi; }
finish() { echo "package: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit; }
skip() {
  echo "SKIP package: $1"
  if [ "${CI:-}" = true ]; then failed=$((failed+1)); fi
  finish
}

[ "$(id -u)" -eq 0 ] || skip "needs root (dpkg -i / dpkg -r)"
for tool in dpkg-buildpackage dh pg_buildext; do
  command -v "$tool" >/dev/null || skip "$tool is missing (apt-get install dpkg-dev debhelper postgresql-server-dev-all)"
done
if dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed'; then
  skip "$pkg is already installed; remove it first (dpkg -r $pkg)"
fi

dir=$(mktemp -d /tmp/awa_shard_deb.XXXXXX); port=$((53000 + RANDOM % 900))
installed=0
cleanup() {
  [ -d "$dir/pg" ] && su postgres -s /bin/bash -c "$PGBIN/pg_ctl -D '$dir/pg' -m immediate stop" >/dev/null 2>&1
  [ "$installed" = 1 ] && dpkg -r "$pkg" >/dev/null 2>&1
  if [ "$failed" -gt 0 ] || [ "${KEEP:-0}" = 1 ]; then echo "package test files kept in $dir"; else rm -rf "$dir"; fi
}
trap cleanup EXIT
extversion=$(sed -n 's/^EXTVERSION = //p' "$tree/Makefile")
# The committed scripts and the full script of EXTVERSION, which the build makes.
scripts=$( (cd "$tree/sql" && ls awa_shard--*.sql; echo "awa_shard--$extversion.sql") | sort -u)

# 1. Build in a copy (dpkg-buildpackage writes ../*.deb), from the tree's files without
#    build products.
mkdir -p "$dir/build/src"
rsync -a --exclude .git --exclude-from="$tree/.gitignore" "$tree/" "$dir/build/src/"
( cd "$dir/build/src" && dpkg-buildpackage -us -uc -b ) > "$dir/build.log" 2>&1
check "dpkg-buildpackage -us -uc -b succeeds" "$?" "0"
deb=$(ls "$dir"/build/${pkg}_*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || { tail -n 30 "$dir/build.log"; check "a $pkg .deb was built" "none" "one"; finish; }
check "the package is $pkg" "$(dpkg-deb -f "$deb" Package)" "$pkg"
version=$(dpkg-deb -f "$deb" Version)
check "the package's upstream version is EXTVERSION ($version)" "$(echo "$version" | sed -E 's/^[0-9]+://; s/[~-].*$//')" "$extversion"
check "the package depends on postgresql-15" "$(dpkg-deb -f "$deb" Depends | grep -cE '(^|, )postgresql-15( |,|$)')" "1"
contents=$(dpkg -c "$deb" | awk '{print $6}' | sed 's#^\./#/#')
check "the .deb holds the library" "$(echo "$contents" | grep -cx "$libdir/awa_shard.so")" "1"
check "the .deb holds the control file" "$(echo "$contents" | grep -cx "$extdir/awa_shard.control")" "1"
for s in $scripts; do
  check "the .deb holds $s" "$(echo "$contents" | grep -cx "$extdir/$s")" "1"
done
check "the .deb holds nothing else of the extension" "$(echo "$contents" | grep -c "^$extdir/awa_shard")" "$(( 1 + $(echo "$scripts" | wc -w) ))"
check "the .deb holds the copyright file" "$(echo "$contents" | grep -cx "/usr/share/doc/$pkg/copyright")" "1"

# 2. Only the package's files: remove what make install left, then dpkg -i.
make -s -C "$dir/build/src" uninstall PG_CONFIG="$PGBIN/pg_config" >/dev/null 2>&1
check "no extension file is left before dpkg -i" "$(ls "$libdir"/awa_shard.so "$extdir"/awa_shard* 2>/dev/null | wc -l)" "0"
dpkg -i "$deb" > "$dir/dpkg.log" 2>&1
check "dpkg -i succeeds" "$?" "0"
dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' && installed=1
check "$pkg is installed" "$installed" "1"
check "dpkg owns the installed library" "$(dpkg -S "$libdir/awa_shard.so" 2>/dev/null | cut -d: -f1)" "$pkg"
check "the installed files match the package (dpkg --verify)" "$(dpkg --verify "$pkg" 2>&1 | wc -l)" "0"

# 3. make installcheck from a fresh copy of the tree, against a server without preload.
rsync -a --exclude .git --exclude-from="$tree/.gitignore" --exclude debian "$tree/" "$dir/check/"
mkdir -p "$dir/sock"; chown -R postgres:postgres "$dir"
as_pg() { su postgres -s /bin/bash -c "$*"; }
as_pg "$PGBIN/initdb -D '$dir/pg' -A trust -U postgres >/dev/null" &&
  printf "port = %s\nlisten_addresses = ''\nunix_socket_directories = '%s'\nfsync = off\nlc_messages = 'C'\nmax_prepared_transactions = 4\n" "$port" "$dir/sock" >> "$dir/pg/postgresql.conf" &&
  as_pg "$PGBIN/pg_ctl -D '$dir/pg' -l '$dir/pg.log' -w start >/dev/null"
check "a PostgreSQL 15 server without preload starts" "$?" "0"
check "CREATE EXTENSION awa_shard installs default_version from the package" \
  "$(as_pg "$PGBIN/psql -h '$dir/sock' -p $port -X -A -t -q -d postgres -c 'CREATE EXTENSION awa_shard' -c \"SELECT extversion FROM pg_extension WHERE extname = 'awa_shard'\" -c 'DROP EXTENSION awa_shard'" 2>&1)" \
  "$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$tree/awa_shard.control")"
as_pg "cd '$dir/check' && PGHOST='$dir/sock' PGPORT=$port make installcheck PG_CONFIG=$PGBIN/pg_config" > "$dir/installcheck.log" 2>&1
rc=$?
grep -E '^test |tests (passed|failed)' "$dir/installcheck.log" | grep -vE ' ok +[0-9]+ ms$'
check "make installcheck exits 0" "$rc" "0"
# One count per pg_regress run: the regression suite, then the isolation suite.
for suite in 1 2; do
  line=$(grep -E 'All [0-9]+ tests passed|[0-9]+ of [0-9]+ tests failed' "$dir/installcheck.log" | sed -n "${suite}p")
  if n=$(echo "$line" | grep -oE 'All [0-9]+' | grep -oE '[0-9]+'); then passed=$((passed + n))
  elif [ -n "$line" ]; then
    m=$(echo "$line" | awk '{print $1}'); n=$(echo "$line" | awk '{print $3}')
    passed=$((passed + n - m)); failed=$((failed + m))
  else failed=$((failed + 1)); echo "not ok - installcheck suite $suite did not run"; fi
done
[ -f "$dir/check/regression.diffs" ] && head -n 80 "$dir/check/regression.diffs"
as_pg "$PGBIN/pg_ctl -D '$dir/pg' -m fast stop >/dev/null"

# 4. dpkg -r leaves nothing behind.
dpkg -r "$pkg" > "$dir/dpkg-r.log" 2>&1
check "dpkg -r succeeds" "$?" "0"
dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || installed=0
check "$pkg is removed" "$installed" "0"
check "no extension file is left after dpkg -r" "$(ls "$libdir"/awa_shard.so "$extdir"/awa_shard* 2>/dev/null | wc -l)" "0"
finish
