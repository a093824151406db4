// Command dashboard prints the organisation's treasury at a glance: the portfolio total
// and its split by chain, every position, and the newest audit-log entries.
//
// Its key needs only the read action on the treasury app, which sees the balances and
// the audit log of every app but can create, approve or sign nothing.
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/opentreasury/treasury/client"
)

type portfolio struct {
	TotalUSD    string `json:"totalUsd"`
	WalletCount int    `json:"walletCount"`
	ChainRollup []struct {
		Chain    string `json:"chain"`
		USDValue string `json:"usdValue"`
	} `json:"chainRollup"`
	SyncedAt *string `json:"syncedAt"`
}

type position struct {
	WalletID string  `json:"walletId"`
	Chain    string  `json:"chain"`
	Asset    string  `json:"asset"`
	Amount   string  `json:"amount"`
	USDValue *string `json:"usdValue"` // null when the asset has no price
}

type auditEntry struct {
	App   string `json:"app"`
	Actor struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	} `json:"actor"`
	Action       string `json:"action"`
	ResourceType string `json:"resourceType"`
	ResourceID   string `json:"resourceId"`
	CreatedAt    string `json:"createdAt"`
}

type page[T any] struct {
	Data       []T     `json:"data"`
	NextCursor *string `json:"nextCursor"`
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dashboard", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		baseURL = fs.String("url", cmp.Or(os.Getenv("TREASURY_URL"), "http://127.0.0.1:8080"), "where the API answers ($TREASURY_URL)")
		token   = fs.String("token", "", "a tk_ key with only the read action on treasury (default $TREASURY_TOKEN)")
		audit   = fs.Int("audit", 10, "how many of the newest audit-log entries to show (1-200)")
		timeout = fs.Duration("timeout", 30*time.Second, "how long the whole dashboard may take")
	)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	*token = strings.TrimSpace(cmp.Or(*token, os.Getenv("TREASURY_TOKEN")))
	if *token == "" {
		fmt.Fprintln(stderr, "dashboard: --token (or $TREASURY_TOKEN) is required")
		return 2
	}
	if *audit < 1 || *audit > 200 {
		fmt.Fprintln(stderr, "dashboard: --audit must be between 1 and 200")
		return 2
	}
	c, err := client.New(*baseURL, client.WithToken(*token))
	if err != nil {
		fmt.Fprintln(stderr, "dashboard:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := show(ctx, c, *audit, stdout); err != nil {
		fmt.Fprintln(stderr, "dashboard:", err)
		return 1
	}
	return 0
}

func show(ctx context.Context, c *client.Client, auditLimit int, stdout io.Writer) error {
	var p portfolio
	if err := c.Do(ctx, "GET", "/treasury/portfolio", nil, &p); err != nil {
		return fmt.Errorf("portfolio: %w", err)
	}
	// Positions are paged; follow the cursor to the end so the list is complete.
	var positions []position
	for cursor := ""; ; {
		q := url.Values{"limit": {"200"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var pg page[position]
		if err := c.Do(ctx, "GET", "/treasury/positions?"+q.Encode(), nil, &pg); err != nil {
			return fmt.Errorf("positions: %w", err)
		}
		positions = append(positions, pg.Data...)
		if pg.NextCursor == nil {
			break
		}
		cursor = *pg.NextCursor
	}
	var logs page[auditEntry]
	if err := c.Do(ctx, "GET", "/audit-logs?limit="+strconv.Itoa(auditLimit), nil, &logs); err != nil {
		return fmt.Errorf("audit logs: %w", err)
	}

	// Figures are the API's decimal strings, printed as they are: no float ever rounds them.
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "Total\t%s USD\t%d wallets, synced %s\n", p.TotalUSD, p.WalletCount, deref(p.SyncedAt, "never"))
	for _, ch := range p.ChainRollup {
		fmt.Fprintf(w, "  %s\t%s USD\n", ch.Chain, ch.USDValue)
	}
	fmt.Fprintf(w, "\nPositions (%d)\n", len(positions))
	fmt.Fprintln(w, "WALLET\tCHAIN\tASSET\tAMOUNT\tUSD")
	for _, ps := range positions {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", ps.WalletID, ps.Chain, ps.Asset, ps.Amount, deref(ps.USDValue, "-"))
	}
	fmt.Fprintf(w, "\nAudit log (newest %d)\n", len(logs.Data))
	fmt.Fprintln(w, "TIME\tAPP\tACTION\tRESOURCE\tACTOR")
	for _, a := range logs.Data {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s %s\t%s %s\n", a.CreatedAt, a.App, a.Action, a.ResourceType, a.ResourceID,
			a.Actor.Type, a.Actor.ID)
	}
	return w.Flush()
}

func deref(s *string, def string) string {
	if s == nil {
		return def
	}
	return *s
}
