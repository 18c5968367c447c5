#!/usr/bin/env bash
# Installs what the build needs and a fresh Debian machine lacks: libclang
# (RocksDB's bindings are generated with bindgen). Idempotent and quiet when
# everything is there.
set -euo pipefail
# bindgen loads libclang.so or libclang-N.so (libclang-cpp, which some
# machines carry without libclang itself, does not count).
have_libclang() {
  local f
  for f in ${LIBCLANG_PATH:+"$LIBCLANG_PATH"/libclang*.so*} /usr/lib/llvm-*/lib/libclang.so* \
    /usr/lib/llvm-*/lib/libclang-[0-9]*.so* /usr/lib/*-linux-gnu/libclang.so* \
    /usr/lib/*-linux-gnu/libclang-[0-9]*.so* /usr/lib64/libclang.so* /usr/local/lib/libclang.so*; do
    [ -e "$f" ] && return 0
  done
  return 1
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
