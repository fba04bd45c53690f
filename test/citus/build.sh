#!/usr/bin/env bash
# test/citus/build.sh — build Citus once into a cache and install it into a PostgreSQL.
#
#   PG_CONFIG=/path/to/pg_config test/citus/build.sh
#
# The source is the vendored archive (env AWA_CITUS_VENDOR, else ../shared/vendor relative to
# the repository root) with its PostgreSQL 15.20 patch. The installed files are staged with
# DESTDIR into ${AWA_CITUS_CACHE:-${XDG_CACHE_HOME:-/var/cache}/awa_shard}/citus-<key>, where
# <key> is a hash of the archive, the patch and `pg_config --version`; a second run copies the
# cached files into the target PostgreSQL without building.
#
# Exit codes: 0 installed; 3 vendor source absent (the Citus suite is skipped); 1 failure.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
vendor=${AWA_CITUS_VENDOR:-$root/../shared/vendor}
archive=$vendor/citus-13.2.2.tar.gz
patchf=$vendor/citus-13.2.2-pg15.20.patch
if [ ! -f "$archive" ]; then
  echo "citus: vendor source absent ($archive); set AWA_CITUS_VENDOR to its directory"
  exit 3
fi
PG_CONFIG=${PG_CONFIG:-$(command -v pg_config || true)}
[ -x "$PG_CONFIG" ] || { echo "citus: no pg_config (set PG_CONFIG)"; exit 1; }

pgver=$("$PG_CONFIG" --version)
# The project's own fixes to Citus, applied after the vendor's patch (test/citus/*.patch):
# citus-13.2.2-null-distribution-argument.patch — a delegated function called with its
# distribution argument NULL (a DEFAULT NULL p_queue left out) crashed the backend: Citus
# hashed the NULL; it now runs the call where it was made.
own_patches=$(ls "$here"/citus-*.patch 2>/dev/null || true)
key=$( { sha256sum "$archive" | cut -d' ' -f1; [ -f "$patchf" ] && sha256sum "$patchf" | cut -d' ' -f1
         for p in $own_patches; do sha256sum "$p" | cut -d' ' -f1; done
         echo "$pgver"; "$PG_CONFIG" --pkglibdir; } | sha256sum | cut -c1-16)
cache_root=${AWA_CITUS_CACHE:-${XDG_CACHE_HOME:-/var/cache}/awa_shard}
cache=$cache_root/citus-$key
pkglibdir=$("$PG_CONFIG" --pkglibdir)
sharedir=$("$PG_CONFIG" --sharedir)

if [ ! -f "$cache/.complete" ]; then
  # Build dependencies (the vendor README's list), installed only when root and missing.
  deps="libpq-dev libcurl4-openssl-dev liblz4-dev libzstd-dev libkrb5-dev libselinux1-dev libpam0g-dev autoconf flex bison"
  missing=""
  for p in $deps; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
  if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ]; then
      echo "citus: installing build dependencies:$missing"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing >/dev/null
    else
      echo "citus: missing build dependencies:$missing (not root; trying anyway)"
    fi
  fi
  work=$(mktemp -d "${TMPDIR:-/tmp}/citus-build.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  echo "citus: building $(basename "$archive") for $pgver into $cache"
  tar xzf "$archive" -C "$work"
  src=$(find "$work" -maxdepth 1 -mindepth 1 -type d | head -1)
  [ -f "$patchf" ] && (cd "$src" && patch -s -p1 < "$patchf")
  for p in $own_patches; do (cd "$src" && patch -s -p1 < "$p"); done
  # A PostgreSQL whose include directory lacks libpq's headers (a relocated copy) takes the
  # system libpq's (libpq-dev).
  extra_cppflags=""
  if [ ! -f "$("$PG_CONFIG" --includedir)/libpq-fe.h" ]; then
    extra_cppflags="-I$(pkg-config --variable=includedir libpq 2>/dev/null || echo /usr/include/postgresql)"
  fi
  export CPPFLAGS="${CPPFLAGS:-} $extra_cppflags"
  (cd "$src" && ./configure -q PG_CONFIG="$PG_CONFIG" >"$work/configure.log" 2>&1) \
    || { tail -30 "$work/configure.log"; exit 1; }
  (cd "$src" && make -s -j"${AWA_CITUS_JOBS:-2}" CPPFLAGS="$CPPFLAGS" >"$work/make.log" 2>&1) \
    || { tail -40 "$work/make.log"; exit 1; }
  rm -rf "$cache.tmp"; mkdir -p "$cache.tmp"
  (cd "$src" && make -s install DESTDIR="$cache.tmp" >"$work/install.log" 2>&1) \
    || { tail -30 "$work/install.log"; exit 1; }
  touch "$cache.tmp/.complete"
  rm -rf "$cache"; mv "$cache.tmp" "$cache"
else
  echo "citus: using cached build $cache"
fi

# Install the staged files into the target: library, extension scripts, control file.
# The staged tree mirrors the absolute install paths under $cache.
# With AWA_CITUS_UNDO set (a directory), what the install changes can be undone exactly: a
# file it adds is listed in $AWA_CITUS_UNDO/added, a file it replaces is kept first under
# $AWA_CITUS_UNDO/kept/<its absolute path> (test/run undoes both at its end).
n=0
while IFS= read -r -d '' f; do
  rel=${f#"$cache"}
  mkdir -p "$(dirname "$rel")"
  if [ -n "${AWA_CITUS_UNDO:-}" ]; then
    if [ ! -e "$rel" ]; then echo "$rel" >> "$AWA_CITUS_UNDO/added"
    elif ! cmp -s "$f" "$rel" && [ ! -e "$AWA_CITUS_UNDO/kept$rel" ]; then
      mkdir -p "$AWA_CITUS_UNDO/kept$(dirname "$rel")"; cp -a "$rel" "$AWA_CITUS_UNDO/kept$rel"
    fi
  fi
  # A file already there unchanged stays; another goes in under a new inode (copy, then
  # rename), so that a server running with the old library mapped is not disturbed.
  if ! cmp -s "$f" "$rel"; then
    cp -f "$f" "$rel.awa_new.$$" && mv -f "$rel.awa_new.$$" "$rel" || exit 1
  fi
  n=$((n + 1))
done < <(find "$cache" -type f ! -name .complete -print0)
[ -f "$pkglibdir/citus.so" ] || { echo "citus: $pkglibdir/citus.so not installed"; exit 1; }
[ -f "$sharedir/extension/citus.control" ] || { echo "citus: citus.control not installed"; exit 1; }
echo "citus: installed $n files into $(dirname "$pkglibdir")"
