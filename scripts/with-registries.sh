#!/usr/bin/env bash
# with-registries.sh: runs a command with two local OCI registries (Debian's docker-registry on
# 127.0.0.1, storage in a temp dir): one without auth, one with htpasswd basic auth. Exports
# TREESEAL_TEST_REGISTRY (+ _STORAGE), TREESEAL_TEST_REGISTRY_AUTH, TREESEAL_TEST_REGISTRY_USER and
# TREESEAL_TEST_REGISTRY_PASSWORD, and stops both (by pid) on exit.
# usage: scripts/with-registries.sh COMMAND [ARG...]
set -euo pipefail
if [ "$#" -eq 0 ]; then
  echo "usage: $0 COMMAND [ARG...]" >&2
  exit 2
fi
base=$(mktemp -d /tmp/treeseal-registries.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$base"
}
trap cleanup EXIT INT TERM

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# start NAME [AUTH_YAML]: writes a config, starts the registry, waits for GET /v2/ (200, or 401 with
# auth), and leaves its address in $address (not a subshell: the pid must reach the trap).
start() {
  local name=$1 auth=${2:-} port
  port=$(free_port)
  mkdir -p "$base/$name"
  cat >"$base/$name/config.yml" <<YAML
version: 0.1
log:
  level: error
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $base/$name/data
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$port
$auth
YAML
  docker-registry serve "$base/$name/config.yml" >"$base/$name/log" 2>&1 &
  pids+=("$!")
  for _ in $(seq 1 200); do
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v2/" || true)
    if [ "$code" = 200 ] || [ "$code" = 401 ]; then
      address="127.0.0.1:$port"
      return 0
    fi
    sleep 0.1
  done
  echo "registry $name did not answer GET /v2/ on port $port:" >&2
  cat "$base/$name/log" >&2
  return 1
}

export TREESEAL_TEST_REGISTRY_USER=treeseal TREESEAL_TEST_REGISTRY_PASSWORD=ci-$RANDOM$RANDOM
# bcrypt cost 4: a higher cost makes every authenticated request slow.
htpasswd -B -C 4 -b -c "$base/htpasswd" "$TREESEAL_TEST_REGISTRY_USER" "$TREESEAL_TEST_REGISTRY_PASSWORD" 2>/dev/null
address=
start plain
TREESEAL_TEST_REGISTRY=$address
start basic "auth:
  htpasswd:
    realm: treeseal-ci
    path: $base/htpasswd"
TREESEAL_TEST_REGISTRY_AUTH=$address
export TREESEAL_TEST_REGISTRY TREESEAL_TEST_REGISTRY_AUTH TREESEAL_TEST_REGISTRY_STORAGE="$base/plain/data"
echo "registries: $TREESEAL_TEST_REGISTRY (no auth), $TREESEAL_TEST_REGISTRY_AUTH (basic auth)" >&2
"$@"
