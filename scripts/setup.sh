#!/usr/bin/env bash
# Installs what the build needs and a fresh Debian machine lacks: libclang
# (RocksDB's bindings are generated with bindgen). Idempotent and quiet when
# everything is there.
set -euo pipefail
have_libclang() {
  ls /usr/lib/llvm-*/lib/libclang*.so* /usr/lib/x86_64-linux-gnu/libclang*.so* >/dev/null 2>&1
}
if ! have_libclang; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "setup: installing libclang-dev (needed to build RocksDB's bindings)" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libclang-dev >/dev/null
  elif command -v sudo >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing libclang-dev with sudo (needed to build RocksDB's bindings)" >&2
    sudo apt-get update -qq
    sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libclang-dev >/dev/null
  else
    echo "setup: libclang is missing. Install it (Debian/Ubuntu: apt-get install libclang-dev;" >&2
    echo "       Fedora: dnf install clang-devel; macOS: xcode-select --install) and retry." >&2
    exit 1
  fi
fi
for tool in cargo cc c++ make; do
  command -v "$tool" >/dev/null 2>&1 || { echo "setup: '$tool' is missing; install a Rust toolchain and a C/C++ compiler" >&2; exit 1; }
done
