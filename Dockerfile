# The production image: the five services and the `agentic` CLI, release builds of those
# packages only; compose and Kubernetes pick the binary per service.
#   docker build -t agentic:dev .
# The stand-in model (a test double of an LLM, for `docker compose --profile demo`) is an
# image of its own, never in the production one:
#   docker build --target stand-in-model -t agentic-stand-in:dev .

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# The binaries are removed from the cached target folder first, so that one this build does not
# make can never be copied from an earlier build.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    find target/release -maxdepth 1 -type f -executable -delete 2>/dev/null; \
    cargo build --release --locked \
        -p prompt-gateway -p classic-executor -p code-executor -p hosted-executor -p tool-host \
        -p agentic-client --bins \
    && mkdir -p /out \
    && cp target/release/prompt-gateway target/release/classic-executor target/release/code-executor \
          target/release/hosted-executor target/release/tool-host target/release/agentic /out/

FROM rust:1.95-bookworm AS build-stand-in-model
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    find target/release -maxdepth 1 -type f -executable -delete 2>/dev/null; \
    cargo build --release --locked -p agentic-testkit --bin stand-in-model \
    && mkdir -p /out \
    && cp target/release/stand-in-model /out/

FROM debian:bookworm-slim AS runtime
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /data --create-home agentic
USER 10001:10001
WORKDIR /data

FROM runtime AS stand-in-model
COPY --from=build-stand-in-model /out/ /usr/local/bin/
CMD ["stand-in-model"]

# The last stage is what a plain `docker build` makes.
FROM runtime AS production
COPY --from=build /out/ /usr/local/bin/
# Each service's health check is its own binary: `<service> --probe`.
CMD ["prompt-gateway"]
