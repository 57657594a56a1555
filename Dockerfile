# syntax=docker/dockerfile:1
# noe-rs container image: the `noe` binary on distroless (glibc, CA certificates, non-root).
#
#   docker buildx build --platform linux/amd64,linux/arm64 -t REGISTRY/noe-rs:TAG --push .
#
# The builder always runs on the build machine's own platform ($BUILDPLATFORM) and cross-compiles
# for each $TARGETARCH, so a multi-arch build needs no emulation.

ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=bookworm
# glibc of the runtime must be at least the builder's: keep the Debian releases in step.
ARG RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot

FROM --platform=$BUILDPLATFORM rust:${RUST_VERSION}-${DEBIAN_RELEASE} AS build
ARG TARGETARCH
# Linkers and C compilers (ring builds C) for both targets; the native gcc provides the
# <triple>-gcc name for the build machine's own architecture.
ENV CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER=x86_64-linux-gnu-gcc \
    CC_x86_64_unknown_linux_gnu=x86_64-linux-gnu-gcc \
    CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
    CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc \
    CARGO_TERM_COLOR=never
RUN set -eux; \
    case "$TARGETARCH" in \
      amd64) triple=x86_64-unknown-linux-gnu;  cross_gcc=gcc-x86-64-linux-gnu ;; \
      arm64) triple=aarch64-unknown-linux-gnu; cross_gcc=gcc-aarch64-linux-gnu ;; \
      *) echo "unsupported TARGETARCH=$TARGETARCH (amd64 or arm64)" >&2; exit 1 ;; \
    esac; \
    if [ "$(dpkg --print-architecture)" != "$TARGETARCH" ]; then \
      apt-get update; \
      apt-get install -y --no-install-recommends "$cross_gcc" "libc6-dev-${TARGETARCH}-cross"; \
      rm -rf /var/lib/apt/lists/*; \
    fi; \
    rustup target add "$triple"; \
    echo "$triple" > /rust-target

# The commit built, for noe_build_info{revision} (the build context has no .git):
#   --build-arg NOE_BUILD_REVISION="$(git rev-parse --short=12 HEAD)"
ARG NOE_BUILD_REVISION
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY crates ./crates
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    set -eux; \
    triple="$(cat /rust-target)"; \
    cargo build --release --locked -p noe --bin noe --target "$triple"; \
    cp "target/$triple/release/noe" /noe

# distroless/cc: glibc, libgcc, CA certificates and a `nonroot` user (65532), no shell.
FROM ${RUNTIME_IMAGE}
LABEL org.opencontainers.image.title="noe-rs" \
      org.opencontainers.image.description="Kubernetes mutating admission webhook pinning Pods to the CPU architectures their images support" \
      org.opencontainers.image.source="https://github.com/noe-rs/noe-rs" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /noe /noe
USER 65532:65532
# Memory freed after a burst of registry lookups goes back to the OS at once, arenas are
# committed as used (noe_webhook::ALLOCATOR_ENV; docs/configuration.md, "Allocator").
ENV MIMALLOC_PURGE_DELAY=0 \
    MIMALLOC_ARENA_EAGER_COMMIT=0
# webhook (HTTPS), metrics, health probes
EXPOSE 8443 8080 8081
ENTRYPOINT ["/noe"]
