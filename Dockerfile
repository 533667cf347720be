# One image with every buzz-relay binary; the Helm chart picks the binary per Deployment.
# Build: docker build -t buzz-relay:0.1.0 .
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked \
      -p buzz-gateway -p buzz-write -p buzz-query -p buzz-snapshot -p buzz-policy -p buzz-cli \
 && mkdir -p /out \
 && cp target/release/buzz-gateway target/release/buzz-write target/release/buzz-query \
       target/release/buzz-snapshot target/release/buzz-policy target/release/buzz /out/

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/ /usr/local/bin/
USER 65532:65532
EXPOSE 7777 7070 7081 7082 7083
CMD ["/usr/local/bin/buzz-gateway"]
