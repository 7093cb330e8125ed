#!/usr/bin/env bash
# Installs the Debian packages corun builds against. Idempotent: packages already present are
# skipped, and apt-get runs only when something is missing.
set -euo pipefail

packages=(
  cmake ninja-build g++ git make pkg-config ccache
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libspdlog-dev libsqlite3-dev
  libgtest-dev libgmock-dev libbenchmark-dev libcpp-httplib-dev
  libxgboost-dev
  libtorch-dev libopenblas0-openmp
  # The fuzz targets: clang with libFuzzer and the sanitizer runtimes.
  clang libclang-rt-14-dev
  # Integration tests: the Python client (standard library only) and a real Prometheus
  # scraping corun serve (promtool comes with it).
  python3 prometheus
)
if [[ ${CORUN_EXTRA_PACKAGES:-} ]]; then
  read -r -a extra <<<"$CORUN_EXTRA_PACKAGES"
  packages+=("${extra[@]}")
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null; then
    sudo_cmd=(sudo)
  else
    echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
