# The ocifit release image, built by the release workflow (.github/workflows/release.yaml) for
# linux/amd64, linux/arm64 and linux/arm/v7 (one job per platform; the build stage runs as that
# platform, so the binary is its Rust target's); there is no container engine in development (`ocifit-dev image ocifit`
# assembles the same image from a local build, and a test checks that the two agree).
#
# Build stage: the pinned Rust toolchain, dependencies from Cargo.lock only (--locked).
# Final stage: distroless "cc" (glibc, libgcc and CA certificates, no shell, no package manager): the
# binary links glibc and libgcc_s dynamically (ring's C code and the Rust standard library), so
# distroless "static" would not run it; registry TLS verifies against the image's CA certificates.
# It runs as UID/GID 65532 ("nonroot"), the chart's default `runAsUser`. The workflow adds the
# version, revision and creation labels.

FROM docker.io/library/rust:1.95-bookworm AS build
# The source revision `ocifit_build_info` reports (the release workflow passes the commit).
ARG OCIFIT_REVISION
# cargo-auditable embeds the dependency list in the binary, so the image's SBOM (syft, in the release
# workflow) lists the crates compiled into it; the workflow passes the version its binaries use.
ARG CARGO_AUDITABLE_VERSION=0.7.5
WORKDIR /src
RUN cargo install cargo-auditable --locked --version "$CARGO_AUDITABLE_VERSION"
COPY . .
RUN cargo auditable build --release --locked --bin ocifit \
 && install -D -m 0755 target/release/ocifit /out/ocifit

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/ocifit /usr/local/bin/ocifit
LABEL org.opencontainers.image.title="ocifit" \
      org.opencontainers.image.description="Kubernetes operator that gives every node the container image built for it" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/ocifit/ocifit"
USER 65532:65532
EXPOSE 8080 8443
ENTRYPOINT ["ocifit"]
CMD ["run"]
