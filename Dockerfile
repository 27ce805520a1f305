# syntax=docker/dockerfile:1
# enrichd on a distroless static image: the binary, CA certificates for the vendors'
# and webhooks' https, and nothing else; it runs as the image's non-root user.
#
#   docker build --build-arg VERSION=$(git describe --tags --always) -t enrichd .
#   docker run -d --name enrichd -p 127.0.0.1:8080:8080 -v enrichd-data:/data \
#     --stop-timeout 45 enrichd
#   docker exec enrichd enrichd orgs create acme

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/enrichd . \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/enrichd /usr/local/bin/enrichd
# The volume's mount point, owned by the nonroot user (65532) so a new volume is too.
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
WORKDIR /data
VOLUME /data
# Every command finds the database there; serve listens on every interface of the
# container (publish the port to the address you want).
ENV ENRICHD_DB=/data/enrichd.db \
    ENRICHD_ADDR=0.0.0.0:8080
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/enrichd"]
CMD ["serve"]
