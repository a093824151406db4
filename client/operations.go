package client

import (
	"context"
	"encoding/json"
	"net/http"
)

// Health reports whether the service's process is alive (GET /healthz). It carries no
// credential.
func (c *Client) Health(ctx context.Context, opts ...CallOption) error {
	return c.send(ctx, call{method: http.MethodGet, path: "/healthz", anonymous: true, opts: opts})
}

// Ready reports whether the service takes traffic (GET /readyz): nil when its database
// and Temporal answer, else a *Problem (503 unavailable) naming what did not. It asks
// once, without retrying: its answer is the point.
func (c *Client) Ready(ctx context.Context, opts ...CallOption) error {
	return c.send(ctx, call{method: http.MethodGet, path: "/readyz", anonymous: true, once: true, opts: opts})
}

// OpenAPI returns the OpenAPI 3.1 document of the API (GET /openapi.json).
func (c *Client) OpenAPI(ctx context.Context, opts ...CallOption) (json.RawMessage, error) {
	var doc json.RawMessage
	if err := c.send(ctx, call{method: http.MethodGet, path: "/openapi.json", anonymous: true, out: &doc, opts: opts}); err != nil {
		return nil, err
	}
	return doc, nil
}
