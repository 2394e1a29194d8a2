# Shared helpers for scripts/test, scripts/demo and scripts/bench (sourced by bash, not run;
# scripts/bench calls ensure_packages and build_and_install through bash).
# Clusters are throwaway: initdb + pg_ctl in a temp dir, Unix socket only, run as the
# `postgres` OS user when invoked as root (PostgreSQL refuses to run as root).

PG_CONFIG=${PG_CONFIG:-pg_config}
# What the build, the tests, the demo and the bench use today.
PACKAGES="build-essential postgresql-15 postgresql-server-dev-15 postgresql-15-pgtap
  libtap-parser-sourcehandler-pgtap-perl libipc-run-perl
  libpq-dev libhiredis-dev nlohmann-json3-dev redis-server redis-tools
  libnats-dev nats-server"
# The kafka sink (librdkafka) and its tests: librdkafka's mock cluster and kcat to read it back.
PACKAGES="$PACKAGES librdkafka-dev kcat"
# The rabbitmq sink (rabbitmq-c) and its tests: a rabbitmq-server node of their own.
PACKAGES="$PACKAGES librabbitmq-dev rabbitmq-server"
# The webhook sink (libcurl; its signature is OpenSSL's HMAC) and its tests' receiver (python3,
# and openssl for a self-signed certificate).
PACKAGES="$PACKAGES libcurl4-openssl-dev libssl-dev python3 openssl"

say() { printf '%s\n' "$*" >&2; }

# Installs the Debian packages the build and the tests need (root only, only when missing).
ensure_packages() {
  local missing=()
  for p in $PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    say "missing packages: ${missing[*]} (run as root, or install them)"; return 1
  fi
  say "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null && apt-get install -y -qq "${missing[@]}" >/dev/null
}

# Builds and installs the extension from the repository root ($1).
build_and_install() {
  local root=$1
  make -C "$root" -s PG_CONFIG="$PG_CONFIG" >/dev/null || return 1
  if [ "$(id -u)" -eq 0 ]; then
    make -C "$root" -s PG_CONFIG="$PG_CONFIG" install >/dev/null
  else
    make -C "$root" -s PG_CONFIG="$PG_CONFIG" install >/dev/null 2>&1 ||
      say "note: could not install as $(id -un); using what is installed"
  fi
}

PG_BINDIR=$($PG_CONFIG --bindir)
PGXS_DIR=$(dirname "$($PG_CONFIG --pgxs)")/..
export PATH="$PG_BINDIR:$PATH"

# Runs a command as the cluster owner: `postgres` when we are root, else ourselves.
as_pg() {
  if [ "$(id -u)" -eq 0 ]; then
    local envs=(PATH="$PATH") v
    for v in PERL5LIB PG_REGRESS TESTDIR PG_TEST_PORT_DIR PGHOST PGPORT PGDATABASE PGUSER STATESMAN_SOURCE_DIR; do
      [ -n "${!v:-}" ] && envs+=("$v=${!v}")
    done
    runuser -u postgres -- env "${envs[@]}" "$@"
  else
    "$@"
  fi
}

# Makes a scratch directory owned by the cluster owner.
scratch_dir() {
  local dir
  dir=$(mktemp -d "/tmp/statesman-$1.XXXXXX")
  [ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
  chmod 755 "$dir"
  echo "$dir"
}

# Picks a free TCP port on loopback, starting at $1.
free_port() {
  local port=$1
  while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
  echo "$port"
}

# start_cluster DIR PORT [postgresql.conf lines...]: initdb and start; socket in DIR.
start_cluster() {
  local dir=$1 port=$2; shift 2
  as_pg initdb -D "$dir/data" -A trust -U postgres --no-sync >"$dir/initdb.log" 2>&1 || {
    cat "$dir/initdb.log" >&2; return 1; }
  {
    echo "port = $port"
    echo "listen_addresses = '127.0.0.1'"
    echo "unix_socket_directories = '$dir'"
    echo "shared_preload_libraries = 'statesman'"
    echo "fsync = on"
    for line in "$@"; do echo "$line"; done
  } | as_pg tee -a "$dir/data/postgresql.conf" >/dev/null
  as_pg pg_ctl -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null || {
    cat "$dir/server.log" >&2; return 1; }
}

stop_cluster() {
  [ -d "$1/data" ] && as_pg pg_ctl -D "$1/data" -m fast -w stop >/dev/null 2>&1 || true
}
