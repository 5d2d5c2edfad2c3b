# Skep's own image: one static binary on scratch, with CA certificates for
# https git remotes and registries. Build: docker build -t skep:dev .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-X github.com/skep-cd/skep/version.Version=${VERSION}" \
      -o /out/skep ./cmd/skep

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/skep /skep
USER 0
ENTRYPOINT ["/skep"]
CMD ["controller", "--appset-dir", "/etc/skep/apps", "--data", "/var/lib/skep"]
