# syntax=docker/dockerfile:1
# feedlog's image: `docker build -t feedlog .`, or `docker compose build`.
#
# Build stage: RocksDB and librdkafka are compiled from their bundled
# sources (bindgen needs libclang; librdkafka needs make, zlib, and OpenSSL's
# and Cyrus SASL's headers for TLS and SASL).
FROM rust:1.95-bookworm AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libclang-dev libssl-dev libsasl2-dev pkg-config \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
# A workspace member: Cargo reads its manifest, though only feedlog is built.
COPY benches ./benches
COPY topics ./topics
# Cache mounts (BuildKit): the crate registry and the build directory
# survive between builds, so a change to feedlog's code does not compile
# RocksDB and librdkafka again.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin feedlog \
 && cp target/release/feedlog /usr/local/bin/feedlog

# Runtime stage: the binary (RocksDB and librdkafka are linked in), the
# shared libraries of Kafka's TLS and SASL (with the GSSAPI plugin), CA
# certificates, and curl for health checks.
FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      ca-certificates curl libssl3 libsasl2-2 libsasl2-modules-gssapi-mit \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /data feedlog \
 && mkdir /data /checkpoints && chown feedlog /data /checkpoints
COPY --from=build /usr/local/bin/feedlog /usr/local/bin/feedlog
USER feedlog
# Logs and state live here; a named volume keeps them across restarts.
VOLUME /data
ENV FEEDLOG_DATA=/data
EXPOSE 8080
ENTRYPOINT ["feedlog"]
CMD ["--help"]
