# Production image of the treasury binary (api, worker, migrate, temporal setup).
# The Temporal server is not in it: cmd/treasury does not import it, so the build stays small.
FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so source edits do not invalidate the download layer.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/treasury ./cmd/treasury

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/treasury /treasury
EXPOSE 8080
ENTRYPOINT ["/treasury"]
