package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
)

// ChainRPC sends a JSON-RPC 2.0 request, or a batch of at most 20 (an array), to chain's
// node through POST /api/v1/rpc/{chain}, and returns the JSON-RPC answer as the service sent it.
// Only the read-only methods of docs/api.md's allow-list are served. A refusal past the
// HTTP checks (a method off the list, a write, an eth_getLogs range over 10,000 blocks, a
// node that did not answer) is a JSON-RPC error inside the answer, not an error of this
// call; a chain without a node is a *Problem (404).
func (c *Client) ChainRPC(ctx context.Context, chain string, request json.RawMessage, opts ...CallOption) (json.RawMessage, error) {
	var answer json.RawMessage
	// No Idempotency-Key: every method served is a read, safe to repeat, and a key would
	// only have the service store each answer.
	err := c.send(ctx, call{method: http.MethodPost, path: "/rpc/" + url.PathEscape(chain), body: request, out: &answer,
		unkeyed: true, opts: opts})
	if err != nil {
		return nil, err
	}
	return answer, nil
}
