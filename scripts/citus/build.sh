#!/usr/bin/env bash
# Builds Citus and pgvector from their public sources against Debian 12's PostgreSQL 15 and installs them into it.
#   scripts/citus/build.sh <citus source> <pgvector source>
# The sources are git checkouts of citusdata/citus and pgvector/pgvector (any tag that supports PostgreSQL 15;
# measured with Citus v13.2.2 and pgvector v0.8.6). Needs root (apt-get, make install). Idempotent.
set -euo pipefail
citus_src=${1:?usage: build.sh <citus source> <pgvector source>}
pgvector_src=${2:?usage: build.sh <citus source> <pgvector source>}
citus_tag=${CITUS_TAG:-v13.2.2}
pgvector_tag=${PGVECTOR_TAG:-v0.8.6}
build=${BUILD_DIR:-/tmp/synapto-citus-build}
pg_config=/usr/lib/postgresql/15/bin/pg_config

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq postgresql-15 postgresql-server-dev-15 build-essential autoconf flex bison \
  libcurl4-openssl-dev liblz4-dev libzstd-dev libkrb5-dev libselinux1-dev libxslt1-dev libpam0g-dev \
  libreadline-dev libssl-dev zlib1g-dev >/dev/null

mkdir -p "$build"
checkout() {  # <source> <tag> <dest>: a clean tree of the tag, from a work tree or a bare repository
  rm -rf "$3" && mkdir -p "$3"
  git -C "$1" archive "$2" | tar -x -C "$3"
}
jobs=$(nproc)

if ! "$pg_config" --pkglibdir >/dev/null || [ ! -f "$($pg_config --pkglibdir)/vector.so" ]; then
  checkout "$pgvector_src" "$pgvector_tag" "$build/pgvector"
  make -s -C "$build/pgvector" PG_CONFIG="$pg_config" OPTFLAGS="" -j"$jobs"
  make -s -C "$build/pgvector" PG_CONFIG="$pg_config" install
fi
if [ ! -f "$($pg_config --pkglibdir)/citus.so" ]; then
  checkout "$citus_src" "$citus_tag" "$build/citus"
  # PostgreSQL 15.18 exports have_createdb_privilege (backported), which Citus 13's compatibility header still
  # defines as a static function for servers before 16: keep the server's and leave Citus's copy unused.
  if grep -q "extern bool have_createdb_privilege" "$($pg_config --includedir-server)/commands/dbcommands.h"; then
    sed -i 's/^have_createdb_privilege(void)$/citus_unused_have_createdb_privilege(void)/' \
      "$build/citus/src/include/pg_version_compat.h"
  fi
  (cd "$build/citus" && PG_CONFIG="$pg_config" ./configure --quiet --without-libcurl >/dev/null)
  make -s -C "$build/citus" -j"$jobs"
  make -s -C "$build/citus" install
fi
echo "installed: $(ls "$($pg_config --pkglibdir)" | grep -E '^(citus|vector)\.so$' | tr '\n' ' ')"
