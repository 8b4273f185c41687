# The Shoal image: one static binary on a distroless base, run as a non-root
# user. docker-compose.yml builds it as shoal:dev; internal/deploy's tests
# run this file's `go build` line, so the recipe cannot drift from what builds.

# ---- build: compile a static binary ----
FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so editing the source does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/shoal ./cmd/shoal

# ---- runtime: no shell, no package manager, user nonroot (65532) ----
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.title="shoal" \
      org.opencontainers.image.description="Shoal, a sharded JSON document store" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/shoal /usr/local/bin/shoal
USER 65532:65532
# Where the embedded store keeps ./data when MONGO_URI is unset (writable by nonroot).
WORKDIR /home/nonroot
# The REST API, and gossip (memberlist uses both TCP and UDP).
EXPOSE 8080 7946/tcp 7946/udp
# No curl here: the binary asks its own /readyz (on HTTP_ADDR's port).
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 CMD ["shoal", "health"]
ENTRYPOINT ["shoal"]
CMD ["serve"]
