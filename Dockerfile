# syntax=docker/dockerfile:1
# One image with every buzz-relay binary (buzz-gateway, buzz-write, buzz-query, buzz-snapshot,
# buzz-policy, buzz, buzz-load); the Helm chart picks the binary per Deployment.
#
#   docker build -t buzz-relay:0.1.0 .
#
# The base images are build arguments (defaults: the public images below), so a machine without
# access to Docker Hub can pass its own: RUST_IMAGE needs cargo, rustc and cargo-chef on PATH
# (Debian bookworm, like the runtime base, so the binaries find the same glibc); RUNTIME_IMAGE needs
# apt-get. scripts/image-test.sh builds with stand-ins made from Debian packages this way.
#
# Dependencies are compiled in their own layer (cargo-chef): a change to the workspace's code
# rebuilds only the workspace crates, as long as Cargo.toml/Cargo.lock are unchanged.
ARG RUST_IMAGE=lukemathwalker/cargo-chef:latest-rust-1-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim
ARG PACKAGES="-p buzz-gateway -p buzz-write -p buzz-query -p buzz-snapshot -p buzz-policy -p buzz-cli -p buzz-load"

FROM ${RUST_IMAGE} AS chef
WORKDIR /src
# Stripped binaries without debug info; the same for the dependency layer and the final build, so
# the cached dependencies match.
ENV CARGO_PROFILE_RELEASE_DEBUG=0 \
    CARGO_PROFILE_RELEASE_STRIP=symbols

FROM chef AS planner
COPY . .
RUN cargo chef prepare --recipe-path recipe.json

FROM chef AS build
ARG PACKAGES
COPY --from=planner /src/recipe.json recipe.json
RUN cargo chef cook --release --locked ${PACKAGES} --recipe-path recipe.json
COPY . .
RUN cargo build --release --locked ${PACKAGES} \
 && mkdir -p /out \
 && cd target/release \
 && cp buzz-gateway buzz-write buzz-query buzz-snapshot buzz-policy buzz buzz-load /out/

# Slim rather than distroless: it keeps `sleep` for the chart's preStop delay on Kubernetes
# releases without the native sleep action, and the CA bundle that rustls reads for rediss://,
# tls:// and sslmode=verify-full against public CAs.
FROM ${RUNTIME_IMAGE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/ /usr/local/bin/
USER 65532:65532
EXPOSE 7777 7070 7081 7082 7083 7084 7085
CMD ["/usr/local/bin/buzz-gateway"]
