#!/usr/bin/env bash
# Installs the Debian packages the test suite needs, only those missing. Safe to re-run.
# `--sandbox-only` (make demo): only what a demo run itself needs: bubblewrap (the sandbox) and
# valgrind (the demo's yardstick, its `simulate:` workload).
# `--slow` (make test-slow): also what the slow set's llama.cpp build needs.
set -euo pipefail
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
apt_install() {
  echo "installing: $*"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
need=()
# bubblewrap: every step that runs target code runs in its sandbox.
command -v bwrap >/dev/null || need+=(bubblewrap)
if [ "${1:-}" = --sandbox-only ]; then
  command -v valgrind >/dev/null || need+=(valgrind)
  if ((${#need[@]})); then apt_install "${need[@]}"; fi
  exit 0
fi
if [ "${1:-}" = --image-check ]; then
  # deploy/image-check.sh: a Docker engine and client (Debian's docker.io) and debootstrap (a local
  # Debian base when no registry can be pulled). Not for `make test`: the check is root-only and slow.
  need=()
  command -v dockerd >/dev/null || need+=(docker.io)
  command -v debootstrap >/dev/null || need+=(debootstrap)
  if ((${#need[@]})); then apt_install "${need[@]}"; fi
  exit 0
fi
command -v redis-server >/dev/null || need+=(redis-server)
command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu)
# C++ cross compiler: the llama.cpp recipe test syntax-checks the patched NEON branches with it.
command -v aarch64-linux-gnu-g++ >/dev/null || need+=(g++-aarch64-linux-gnu)
command -v qemu-aarch64-static >/dev/null || need+=(qemu-user-static)
command -v make >/dev/null || need+=(make)
# valgrind: the deterministic yardstick (`simulate:`, jobs/measure/simulate.py) and the callgrind profile.
command -v valgrind >/dev/null || need+=(valgrind)
# nginx: the deploy's front door (deploy/nginx), run in front of `autoresearch serve` by tests/bot.
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx)
command -v chromium >/dev/null || need+=(chromium)
command -v chromedriver >/dev/null || need+=(chromium-driver)
# ccache: the compiler cache C/C++ build steps go through (jobs/guard/operator.py, AUTORESEARCH_CCACHE).
command -v ccache >/dev/null || need+=(ccache)
# `--slow` (make test-slow): the llama.cpp build of tests/kernels/llama_ab.py needs CMake (Ninja and
# ccache make it faster and are used when present).
if [ "${1:-}" = --slow ]; then
  command -v cmake >/dev/null || need+=(cmake)
  command -v ninja >/dev/null || need+=(ninja-build)
fi
if ((${#need[@]})); then apt_install "${need[@]}"; fi
# GitHub's webhook example payloads for tests/bot (pinned; the bot tests install the same into
# the same cache dir themselves if this did not run, and fail clearly without npm).
command -v npm >/dev/null || apt_install npm
WEBHOOK_EXAMPLES="${XDG_CACHE_HOME:-$HOME/.cache}/autoresearch-tests/webhooks-examples-7.6.1"
[ -f "$WEBHOOK_EXAMPLES/node_modules/@octokit/webhooks-examples/api.github.com/index.json" ] || \
  npm install --prefix "$WEBHOOK_EXAMPLES" --no-audit --no-fund --no-save @octokit/webhooks-examples@7.6.1 >/dev/null
# GitHub's OpenAPI description: the fake GitHub's responses are validated against it (tests/fakes/openapi.py
# installs the same version into the same cache dir itself if this did not run).
OPENAPI="${XDG_CACHE_HOME:-$HOME/.cache}/autoresearch-tests/openapi-23.0.2"
[ -f "$OPENAPI/node_modules/@octokit/openapi/generated/api.github.com.json" ] || \
  npm install --prefix "$OPENAPI" --no-audit --no-fund --no-save @octokit/openapi@23.0.2 >/dev/null
