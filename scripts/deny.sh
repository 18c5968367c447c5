#!/usr/bin/env bash
# Supply-chain checks with cargo-deny (deny.toml): licences, banned and
# duplicate crates, and where crates come from, always; known advisories
# (RustSec) whenever its database can be fetched. Installs cargo-deny with
# cargo when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo-deny >/dev/null 2>&1; then
  echo "deny: installing cargo-deny (cargo install --locked cargo-deny; a few minutes, once)" >&2
  cargo install --locked --quiet cargo-deny
fi
cargo deny --locked check bans licenses sources
# The advisory database is a git repository cargo-deny fetches; where it
# cannot be reached, say so rather than pass in silence or fail the build
# for the network.
if cargo deny --locked fetch db >/dev/null 2>&1; then
  cargo deny --locked check advisories
else
  echo "deny: the RustSec advisory database could not be fetched here; advisories NOT checked" \
    "(run 'cargo deny check advisories' where it can be)" >&2
fi
