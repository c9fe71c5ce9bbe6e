# One image with every agentic binary; compose and Kubernetes pick the binary per service.
# Build: docker build -t agentic:dev .

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bins \
    && mkdir -p /out \
    && cp target/release/prompt-gateway target/release/classic-executor target/release/code-executor \
          target/release/hosted-executor target/release/tool-host target/release/agentic target/release/stand-in-model /out/

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /data --create-home agentic
COPY --from=build /out/ /usr/local/bin/
USER 10001:10001
WORKDIR /data
# Each service's health check is its own binary: `<service> --probe`.
CMD ["prompt-gateway"]
