package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/opentreasury/treasury/client"
)

// directory is the organisation's wallets as the job's own pay credential lists them
// (GET /api/v1/wallets, any app's read): the job is told which wallet pays by its id,
// address or label, or takes the first one on a chain, instead of being handed an id.
type directory []client.WalletRef

func listWallets(ctx context.Context, c *client.Client) (directory, error) {
	var out directory
	for w, err := range c.WalletRefs(ctx, client.ListOptions{Limit: 200}) {
		if err != nil {
			return nil, fmt.Errorf("list the organisation's wallets: %w", err)
		}
		out = append(out, w)
	}
	return out, nil
}

// find is the wallet named (an id, an address or a label; "" for the first wallet of
// chain, in the order the organisation registered them).
func (d directory) find(name, chain string) (client.WalletRef, error) {
	for _, w := range d {
		switch {
		case name == "" && w.Chain == chain:
			return w, nil
		case name != "" && (w.ID == name || strings.EqualFold(w.Address, name) || w.Label == name):
			return w, nil
		}
	}
	if name == "" {
		return client.WalletRef{}, fmt.Errorf("the organisation has no wallet on %s that this credential reaches", chain)
	}
	return client.WalletRef{}, fmt.Errorf("no wallet of the organisation (that this credential reaches) has the id, address or label %q", name)
}
