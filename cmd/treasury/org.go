package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"slices"
	"text/tabwriter"

	"github.com/opentreasury/treasury/internal/assemble"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/service"
)

// The operator's commands: organisations and their people, against DATABASE_URL (or
// SQLITE_PATH). They need no Temporal and no running API.

var operatorFlags struct {
	name, ownerEmail, email, publicURL string
	json                               bool
}

// publicURLFlag is the base URL sign-in links point at.
func publicURLFlag(fs *flag.FlagSet, cfg *assemble.Config) {
	fs.StringVar(&operatorFlags.publicURL, "public-url", cfg.PublicURL, "base URL people reach the console at; sign-in links point there (default $PUBLIC_URL)")
	fs.BoolVar(&operatorFlags.json, "json", false, "print the answer as one JSON object")
}

// linkEnv are the variables of a command that prints a sign-in link.
var linkEnv = append(slices.Clone(storeEnv), "PUBLIC_URL")

var operatorCommands = []command{
	{
		words:   []string{"org", "create"},
		summary: "create an organisation and its owner, and print the owner's one-time sign-in link",
		env:     linkEnv,
		flags: func(fs *flag.FlagSet, cfg *assemble.Config) {
			fs.StringVar(&operatorFlags.name, "name", "", "the organisation's name (required)")
			fs.StringVar(&operatorFlags.ownerEmail, "owner-email", "", "the owner's e-mail address (required)")
			publicURLFlag(fs, cfg)
		},
		run: runOrgCreate,
	},
	{
		words:   []string{"org", "list"},
		summary: "list the organisations",
		env:     storeEnv,
		flags: func(fs *flag.FlagSet, _ *assemble.Config) {
			fs.BoolVar(&operatorFlags.json, "json", false, "print one JSON object a line")
		},
		run: runOrgList,
	},
	{
		words:   []string{"org", "disable"},
		args:    "ORG",
		summary: "refuse every credential of an organisation (ORG, org_…) from now on; nothing is deleted",
		env:     storeEnv,
		run:     runOrgDisable,
	},
	{
		words:   []string{"user", "reset"},
		summary: "print a new one-time sign-in link for a person; their earlier links stop working",
		env:     linkEnv,
		flags: func(fs *flag.FlagSet, cfg *assemble.Config) {
			fs.StringVar(&operatorFlags.email, "email", "", "the person's e-mail address (required)")
			publicURLFlag(fs, cfg)
		},
		run: runUserReset,
	},
}

// linkAnswer is what org create and user reset print.
type linkAnswer struct {
	OrgID      string `json:"orgId"`
	OrgName    string `json:"orgName,omitempty"`
	UserID     string `json:"userId"`
	Email      string `json:"email"`
	SignInLink string `json:"signInLink"`
	ExpiresAt  string `json:"expiresAt"`
}

func printLink(proc commandEnv, a linkAnswer) error {
	if operatorFlags.json {
		return json.NewEncoder(proc.stdout).Encode(a)
	}
	w := tabwriter.NewWriter(proc.stdout, 0, 0, 2, ' ', 0)
	if a.OrgName != "" {
		fmt.Fprintf(w, "organisation\t%s\t%s\n", a.OrgID, a.OrgName)
	}
	fmt.Fprintf(w, "person\t%s\t%s\n", a.UserID, a.Email)
	fmt.Fprintf(w, "sign-in link\t%s\n", a.SignInLink)
	fmt.Fprintf(w, "valid until\t%s (once)\n", a.ExpiresAt)
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(proc.stderr, "Pass the link on by a channel you trust: whoever opens it first sets the password.")
	return nil
}

// linkBase is the base URL of sign-in links, with a warning when nothing configured it.
func linkBase(proc commandEnv) (string, error) {
	if operatorFlags.publicURL == "" {
		fmt.Fprintln(proc.stderr, "treasury: neither --public-url nor PUBLIC_URL is set; the link assumes http://127.0.0.1:8080")
	}
	base := cmp.Or(operatorFlags.publicURL, "http://127.0.0.1:8080")
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", usageError("--public-url: not an http(s) URL: " + base)
	}
	return base, nil
}

// operatorErr turns a service refusal into a message for the terminal.
func operatorErr(err error) error {
	var refusal *service.Error
	if !errors.As(err, &refusal) {
		return err
	}
	msg := refusal.Detail
	for _, f := range refusal.Fields {
		msg += fmt.Sprintf("; --%s %s", f.Field, f.Message)
	}
	return errors.New(msg)
}

func runOrgCreate(ctx context.Context, cfg assemble.Config, proc commandEnv) error {
	if operatorFlags.name == "" || operatorFlags.ownerEmail == "" {
		return usageError("--name and --owner-email are required")
	}
	base, err := linkBase(proc)
	if err != nil {
		return err
	}
	return assemble.Operate(ctx, cfg, func(svc *service.Service) error {
		made, err := svc.CreateOrganization(ctx, operatorFlags.name, operatorFlags.ownerEmail)
		if err != nil {
			return operatorErr(err)
		}
		return printLink(proc, linkAnswer{OrgID: made.Organization.ID, OrgName: made.Organization.Name, UserID: made.Owner.ID,
			Email: made.Owner.Email, SignInLink: made.Link.URL(base), ExpiresAt: events.FormatTime(made.Link.ExpiresAt)})
	})
}

func runUserReset(ctx context.Context, cfg assemble.Config, proc commandEnv) error {
	if operatorFlags.email == "" {
		return usageError("--email is required")
	}
	base, err := linkBase(proc)
	if err != nil {
		return err
	}
	return assemble.Operate(ctx, cfg, func(svc *service.Service) error {
		u, link, err := svc.ResetPerson(ctx, operatorFlags.email)
		if err != nil {
			return operatorErr(err)
		}
		return printLink(proc, linkAnswer{OrgID: u.OrgID, UserID: u.ID, Email: u.Email, SignInLink: link.URL(base),
			ExpiresAt: events.FormatTime(link.ExpiresAt)})
	})
}

func runOrgList(ctx context.Context, cfg assemble.Config, proc commandEnv) error {
	return assemble.Operate(ctx, cfg, func(svc *service.Service) error {
		list, err := svc.ListOrganizations(ctx)
		if err != nil {
			return err
		}
		if operatorFlags.json {
			enc := json.NewEncoder(proc.stdout)
			for _, o := range list {
				if err := enc.Encode(orgJSON{ID: o.ID, Name: o.Name, CreatedAt: events.TimeOf(o.CreatedAt),
					DisabledAt: events.TimeOrNil(o.DisabledAt), People: o.People, Wallets: o.Wallets}); err != nil {
					return err
				}
			}
			return nil
		}
		w := tabwriter.NewWriter(proc.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tNAME\tCREATED\tPEOPLE\tWALLETS\tSTATE")
		for _, o := range list {
			state := "active"
			if o.DisabledAt != nil {
				state = "disabled " + events.FormatTime(*o.DisabledAt)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%s\n", o.ID, o.Name, events.FormatTime(o.CreatedAt), o.People, o.Wallets, state)
		}
		return w.Flush()
	})
}

type orgJSON struct {
	ID         string       `json:"id"`
	Name       string       `json:"name"`
	CreatedAt  events.Time  `json:"createdAt"`
	DisabledAt *events.Time `json:"disabledAt,omitempty"`
	People     int64        `json:"people"`
	Wallets    int64        `json:"wallets"`
}

func runOrgDisable(ctx context.Context, cfg assemble.Config, proc commandEnv) error {
	if len(proc.args) != 1 {
		return usageError("name one organisation: treasury org disable org_…")
	}
	return assemble.Operate(ctx, cfg, func(svc *service.Service) error {
		o, err := svc.DisableOrganization(ctx, proc.args[0])
		if err != nil {
			return operatorErr(err)
		}
		fmt.Fprintf(proc.stdout, "%s (%s) disabled at %s: every credential of it is refused; nothing was deleted\n",
			o.ID, o.Name, events.FormatTime(*o.DisabledAt))
		if cfg.DatabaseURL == "" {
			fmt.Fprintln(proc.stderr, "On SQLite no other process hears of it: a running API refuses its cached keys within 30 s.")
		}
		return nil
	})
}
