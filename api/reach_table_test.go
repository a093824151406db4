package api

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/opentreasury/treasury/internal/auth"
)

// Columns of docs/api.md's table "What a credential reaches": how the credential's app
// relates to the resource's app X.
const (
	reachOwnApp   = "credential of X"
	reachOtherApp = "credential of another app that orders"
	reachTreasury = "credential of treasury"
	reachOtherOrg = "credential of another organisation"
)

// reachTable is docs/api.md's table, read from the file: resource → column → the actions
// with which a credential of that column reaches the resource (none: never). The
// authorisation matrix and the isolation test assert it, so the table cannot drift from
// what the API does.
type reachTable map[string]map[string][]string

func readReachTable(t *testing.T) reachTable {
	t.Helper()
	doc, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "### What a credential reaches")
	if !ok {
		t.Fatal(`docs/api.md has no section "What a credential reaches"`)
	}
	var header []string
	table := reachTable{}
	action := regexp.MustCompile("`([a-z]+)`")
	for _, line := range strings.Split(rest, "\n") {
		if !strings.HasPrefix(line, "|") {
			if header != nil {
				break
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		switch {
		case header == nil:
			header = cells
		case strings.HasPrefix(cells[0], "---"):
		default:
			if len(cells) != len(header) {
				t.Fatalf("docs/api.md reach table: row %q has %d cells, the header %d", line, len(cells), len(header))
			}
			row := map[string][]string{}
			for i, cell := range cells[1:] {
				var actions []string
				for _, m := range action.FindAllStringSubmatch(cell, -1) {
					if !auth.IsAction(m[1]) {
						t.Fatalf("docs/api.md reach table: %q is not an action", m[1])
					}
					actions = append(actions, m[1])
				}
				if strings.Contains(cell, "device key") {
					actions = append(actions, heldByADevice)
				}
				row[header[i+1]] = actions
			}
			table[cells[0]] = row
		}
	}
	for _, col := range []string{reachOwnApp, reachOtherApp, reachTreasury, reachOtherOrg} {
		if !slices.Contains(header, col) {
			t.Fatalf("docs/api.md reach table has no column %q (columns %q)", col, header)
		}
	}
	return table
}

// heldByADevice stands, among the actions a credential holds, for its being a signing
// device's key (auth.Principal.SigningDevice); among a cell's actions, for "a device key's
// only": the cell's actions reach only when the credential is one.
const heldByADevice = "(device key)"

// held lists the actions p holds on app, with heldByADevice when p is a device key.
func held(p *auth.Principal, app string) []string {
	out := slices.DeleteFunc(slices.Clone(auth.AllActions), func(x string) bool { return !p.Can(app, x) })
	if p.SigningDevice() {
		out = append(out, heldByADevice)
	}
	return out
}

// reaches says whether a credential of column, holding held actions, reaches resource
// through a route that asks for one of routeActions (any action when empty).
func (rt reachTable) reaches(t *testing.T, resource, column string, held, routeActions []string) bool {
	t.Helper()
	row, ok := rt[resource]
	if !ok {
		t.Fatalf("docs/api.md reach table has no row %q", resource)
	}
	if slices.Contains(row[column], heldByADevice) && !slices.Contains(held, heldByADevice) {
		return false
	}
	return slices.ContainsFunc(row[column], func(a string) bool {
		return a != heldByADevice && slices.Contains(held, a) && (len(routeActions) == 0 || slices.Contains(routeActions, a))
	})
}

// reachColumn is the column of a credential of app for a resource of an app that orders
// (pay in these tests).
func reachColumn(credentialApp, resourceApp string) string {
	switch credentialApp {
	case resourceApp:
		return reachOwnApp
	case "treasury":
		return reachTreasury
	}
	return reachOtherApp
}
