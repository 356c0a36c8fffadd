#!/usr/bin/env bash
# One-time setup of a fresh Debian 12 / Ubuntu machine (run as root):
#   - the system tools the suites drive (nginx + stream module, iperf3, wrk, sshd, bpftrace, ...)
#   - a Python virtual environment in .venv with the pinned requirements and this project
#     installed editable, so plain `robot` finds `libraries.*` by module name.
# Safe to run again.
set -euo pipefail
cd "$(dirname "$0")"

PACKAGES=(
  nginx-light libnginx-mod-stream   # HTTPS server / reverse proxy / stream proxy
  iperf3 wrk                        # traffic tools (wrk2 is not packaged: see README)
  openssh-server openssh-client     # each testbed node is reached over real SSH
  sudo                              # lab users with sudo: true (and the real-lab e2e test)
  iproute2 procps psmisc util-linux # namespaces, veth, ss, taskset, kill
  iputils-ping                      # pre-flight check of every link and route
  ethtool                           # veth checksum offload for VPP dpdk_vdev interfaces
  openssl ca-certificates curl      # certificates, HTTPS checks
  bpftrace bpftool                  # eBPF tracing (sslsniff suite), sockmap evidence
  linux-perf                        # the profiling trial (perf record -e cpu-clock -g)
  chromium                          # headless check of the trend dashboard
  python3 python3-venv python3-pip
)

if [ "$(id -u)" -ne 0 ]; then
  echo "setup.sh: run as root (it installs Debian packages and the suites build namespaces)" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
missing=()
for pkg in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup.sh: installing ${missing[*]}"
  # Debian starts services from postinst; the suites start their own instances instead.
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# vegeta, the constant-rate (open-loop) load generator of the latency pass and the capacity
# search: not packaged by Debian; built from the Go module proxy at a pinned version into the
# project's own folder, which the topologies name (tools.vegeta).
VEGETA_VERSION=v12.13.0
TOOLS_BIN=/opt/hoststack-perf/bin
if [ "$("$TOOLS_BIN/vegeta" -version >/dev/null 2>&1 && grep -a -o -m 1 "tsenart/vegeta/v12.$VEGETA_VERSION" "$TOOLS_BIN/vegeta")" = "" ]; then
  if ! command -v go >/dev/null; then
    echo "setup.sh: go not found: it builds vegeta $VEGETA_VERSION (install Go 1.22 or newer)" >&2
    exit 1
  fi
  echo "setup.sh: installing vegeta $VEGETA_VERSION into $TOOLS_BIN"
  mkdir -p "$TOOLS_BIN"
  GOBIN="$TOOLS_BIN" GOFLAGS=-mod=mod go install "github.com/tsenart/vegeta/v12@$VEGETA_VERSION"
fi

# inferno, which folds perf's stacks and draws the flame graphs of the profiling trial: not
# packaged by Debian; built from crates.io at a pinned version into the same folder.
INFERNO_VERSION=0.12.3
INFERNO_ROOT=$(dirname "$TOOLS_BIN")
if ! { [ -x "$TOOLS_BIN/inferno-flamegraph" ] && grep -q "^\"inferno $INFERNO_VERSION " "$INFERNO_ROOT/.crates.toml" 2>/dev/null; }; then
  if ! command -v cargo >/dev/null; then
    echo "setup.sh: cargo not found: it builds inferno $INFERNO_VERSION (install Rust 1.74 or newer)" >&2
    exit 1
  fi
  echo "setup.sh: installing inferno $INFERNO_VERSION into $TOOLS_BIN"
  cargo install --quiet --locked --root "$INFERNO_ROOT" inferno --version "$INFERNO_VERSION" \
    --no-default-features --features cli,multithreaded,nameattr
fi

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/pip install -q --upgrade pip
.venv/bin/pip install -q -r requirements.txt
.venv/bin/pip install -q --no-deps -e .
echo "setup.sh: done. Activate with: . .venv/bin/activate"
