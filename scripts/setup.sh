#!/usr/bin/env bash
# Installs what the build needs and a fresh Debian machine lacks: libclang
# (RocksDB's bindings are generated with bindgen), and OpenSSL's and Cyrus
# SASL's headers with pkg-config (librdkafka is built with TLS and SASL);
# with --tests also kcat, the
# independent Kafka client of the interop test (which skips with a message
# when kcat cannot be installed), and headless Chromium with its WebDriver
# for the web page's test (left out with a message without them). Idempotent and quiet when everything is
# there. With --bench, also the benchmarks' tools (see the end).
set -euo pipefail
# apt_install PKG WHY: installs a Debian package as root or with sudo;
# returns 1 when neither is possible.
apt_install() {
  command -v apt-get >/dev/null 2>&1 || return 1
  local sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || return 1
    sudo=sudo
  fi
  echo "setup: installing $1 ($2)" >&2
  $sudo apt-get update -qq && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" >/dev/null
}
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
  if ! apt_install libclang-dev "needed to build RocksDB's bindings"; then
    echo "setup: libclang is missing. Install it (Debian/Ubuntu: apt-get install libclang-dev;" >&2
    echo "       Fedora: dnf install clang-devel; macOS: xcode-select --install) and retry." >&2
    exit 1
  fi
fi
# Kafka security: librdkafka links the system's OpenSSL (TLS, SCRAM) and
# libsasl2 (GSSAPI), found through pkg-config.
need_dev() { # need_dev HEADER PACKAGE WHY
  [ -e "$1" ] && return 0
  if ! apt_install "$2" "$3"; then
    echo "setup: $1 is missing. Install $2 (Debian/Ubuntu; Fedora: the matching -devel package) and retry." >&2
    exit 1
  fi
}
if ! command -v pkg-config >/dev/null 2>&1 &&
  ! apt_install pkg-config "librdkafka's build finds OpenSSL and libsasl2 with it"; then
  echo "setup: pkg-config is missing. Install it (Debian/Ubuntu: apt-get install pkg-config) and retry." >&2
  exit 1
fi
need_dev /usr/include/openssl/ssl.h libssl-dev "Kafka TLS and SCRAM"
need_dev /usr/include/sasl/sasl.h libsasl2-dev "Kafka SASL/GSSAPI"
for tool in cargo cc c++ make; do
  command -v "$tool" >/dev/null 2>&1 || { echo "setup: '$tool' is missing; install a Rust toolchain and a C/C++ compiler" >&2; exit 1; }
done
if [ "${1:-}" = --tests ] && ! command -v kcat >/dev/null 2>&1; then
  apt_install kcat "the independent Kafka client of the interop test" ||
    echo "setup: kcat is not installed and cannot be; the Kafka interop test will skip" >&2
fi
if [ "${1:-}" = --tests ] && ! command -v chromedriver >/dev/null 2>&1; then
  { apt_install chromium "the browser of the web page's test" &&
    apt_install chromium-driver "drives that browser (WebDriver)"; } ||
    echo "setup: chromium and chromium-driver are not installed and cannot be; the web page's browser test is left out" >&2
fi
# --bench: the benchmarks' outside tools: wrk (the HTTP load generator of
# `feedlog-bench http` and `feedlog-bench redis`), redis-server and
# redis-benchmark (the Redis design `feedlog-bench redis` compares against).
# Each bench names what it lacks when one is missing. The benches' binary is
# built apart from feedlog's (the crate in benches/): the last line says how
# when it is not built yet.
if [ "${1:-}" = --bench ]; then
  command -v wrk >/dev/null 2>&1 || apt_install wrk "the HTTP load generator of the benches" ||
    echo "setup: wrk is not installed and cannot be; feedlog-bench http cannot run" >&2
  command -v redis-server >/dev/null 2>&1 || apt_install redis-server "the Redis design of feedlog-bench redis" ||
    echo "setup: redis-server is not installed and cannot be; feedlog-bench redis will skip" >&2
  command -v redis-benchmark >/dev/null 2>&1 || apt_install redis-tools "redis-benchmark, the page load of feedlog-bench redis" ||
    echo "setup: redis-tools is not installed and cannot be; feedlog-bench redis will skip its page runs" >&2
  [ -x "${CARGO_TARGET_DIR:-$(dirname "$0")/../target}/release/feedlog-bench" ] ||
    echo "setup: build the benches' binary (and feedlog beside it) with: cargo build --release -p feedlog -p feedlog-bench" >&2
fi
