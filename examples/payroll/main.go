// Command payroll pays a team every month: it reads the team from a CSV file
// (address,amount,reference, one person a line) and makes a payout schedule that pays them
// all, as one batch payment, on a day of every month at 09:00 in a time zone. Then it has
// nothing more to do: each month the treasury makes and submits the batch (under the
// Idempotency-Key <schedule>:<time>, so never twice for one month), and its approvers and
// signers take it from there.
//
//	payroll create --csv team.csv --wallet wal_… --day 25 --timezone Europe/Paris
//	payroll runs pys_…      each month's order and its status
//	payroll pause pys_…     (resume, delete likewise)
//
// It needs read and write on the pay app, as $TREASURY_TOKEN.
package main

import (
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/opentreasury/treasury/client"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: payroll create|runs|pause|resume|delete … (payroll create -h)")
		return 2
	}
	fs := flag.NewFlagSet("payroll "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	baseURL := fs.String("url", envOr("TREASURY_URL", "http://127.0.0.1:8080"), "where the API answers ($TREASURY_URL)")
	file := fs.String("csv", "", "the team: address,amount,reference a line (create)")
	wallet := fs.String("wallet", "", "the paying wallet's id, wal_… (create)")
	asset := fs.String("asset", "USDC", "the asset the team is paid in (create)")
	day := fs.Int("day", 25, "the day of the month to pay, 1 to 28 (create)")
	zone := fs.String("timezone", "UTC", "the time zone of 09:00 on that day (create)")
	every := fs.String("every", "", "instead of monthly, an ISO 8601 interval such as PT2S (create; for trying it out)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	token := os.Getenv("TREASURY_TOKEN")
	if token == "" {
		fmt.Fprintln(stderr, "payroll: set TREASURY_TOKEN to a key with read and write on pay")
		return 2
	}
	c, err := client.New(*baseURL, client.WithToken(token))
	if err != nil {
		fmt.Fprintln(stderr, "payroll:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := fs.Arg(0)
	switch args[0] {
	case "create":
		err = create(ctx, c, stdout, *file, *wallet, *asset, *day, *zone, *every)
	case "runs":
		err = runs(ctx, c, stdout, id)
	case "pause", "resume":
		_, err = c.PausePayoutSchedule(ctx, id, args[0] == "pause")
	case "delete":
		err = c.DeletePayoutSchedule(ctx, id)
	default:
		fmt.Fprintln(stderr, "payroll: unknown command", args[0])
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "payroll:", err)
		return 1
	}
	return 0
}

func create(ctx context.Context, c *client.Client, stdout io.Writer, file, wallet, asset string, day int, zone, every string) error {
	if file == "" || wallet == "" {
		return errors.New("create needs --csv and --wallet")
	}
	if day < 1 || day > 28 {
		return errors.New("--day must be 1 to 28, a day every month has")
	}
	team, err := readTeam(file)
	if err != nil {
		return err
	}
	payment := client.PaymentRequest{WalletID: wallet, Asset: asset, Reference: "payroll"}
	if len(team) == 1 {
		payment.Amount, payment.Destination, payment.Reference = team[0].Amount, client.Destination{Address: team[0].Address}, team[0].Reference
	} else {
		payment.Recipients = team
	}
	req := client.PayoutScheduleRequest{Payment: payment, Cron: fmt.Sprintf("0 9 %d * *", day), Timezone: zone}
	if every != "" {
		req.Cron, req.Timezone, req.Every = "", "", every
	}
	s, err := c.CreatePayoutSchedule(ctx, req)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s\n", s.ID)
	return nil
}

// readTeam reads address,amount,reference lines; a first line naming the columns is skipped.
func readTeam(file string) ([]client.Recipient, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	if err != nil {
		return nil, err
	}
	var team []client.Recipient
	for i, row := range rows {
		if i == 0 && len(row) > 0 && strings.EqualFold(strings.TrimSpace(row[0]), "address") {
			continue
		}
		if len(row) < 2 {
			return nil, fmt.Errorf("%s line %d: want address,amount,reference", file, i+1)
		}
		p := client.Recipient{Address: strings.TrimSpace(row[0]), Amount: strings.TrimSpace(row[1])}
		if len(row) > 2 {
			p.Reference = strings.TrimSpace(row[2])
		}
		team = append(team, p)
	}
	if len(team) == 0 {
		return nil, fmt.Errorf("%s: nobody to pay", file)
	}
	return team, nil
}

// runs prints each month's order and its status, the latest first.
func runs(ctx context.Context, c *client.Client, stdout io.Writer, id string) error {
	for run, err := range c.PayoutRuns(ctx, id, client.ListOptions{}) {
		if err != nil {
			return err
		}
		order := "-"
		if run.OrderID != nil {
			order = *run.OrderID
		}
		fmt.Fprintf(stdout, "%s\t%s\t%s\t%s\n", run.NominalTime.UTC().Format(time.RFC3339), order, run.Status, run.Error)
	}
	return nil
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
