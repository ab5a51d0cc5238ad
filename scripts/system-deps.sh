#!/usr/bin/env bash
# What the test suite needs beyond pip: bubblewrap, a running Docker engine with the sandbox
# image built locally (debootstrap + docker import), PostgreSQL's programs (the SQL tests
# start their own throwaway server) and Chromium (the browser envs drive it headless). Installs with apt-get when run as root on
# Debian/Ubuntu; otherwise says what is missing. Idempotent: quick when all is in place.
set -euo pipefail
PYTHON="${PYTHON:-python3}"
IMAGE="toolgym-sandbox:latest"

missing=()
command -v bwrap >/dev/null || missing+=(bubblewrap)
command -v dockerd >/dev/null || missing+=(docker.io)
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
command -v chromium >/dev/null || missing+=(chromium)
if ((${#missing[@]})); then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "missing system packages: ${missing[*]} (install them as root, then run again)" >&2
    exit 1
  fi
fi

if ! docker info >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then
    echo "the Docker engine is not running and only root can start it here" >&2
    exit 1
  fi
  nohup dockerd >/tmp/toolgym-dockerd.log 2>&1 &
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { tail -20 /tmp/toolgym-dockerd.log >&2; exit 1; }
fi

if ! docker image inspect "$IMAGE" >/dev/null 2>&1; then
  "$PYTHON" -m toolgym sandbox build-image --tag "$IMAGE"
fi
