package policy

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Change is one rule that differs between two policies, for people to read.
type Change struct {
	Rule string `json:"rule"`
	// Kind is added (the rule was absent), removed (it is now absent) or changed.
	Kind string `json:"kind"`
	// From and To are the rule's values, null when absent.
	From json.RawMessage `json:"from"`
	To   json.RawMessage `json:"to"`
	// Added and Removed are, for a rule that is a list, the entries that came and went.
	Added   []json.RawMessage `json:"added,omitempty"`
	Removed []json.RawMessage `json:"removed,omitempty"`
	// Text says it in one line.
	Text string `json:"text"`
}

// Change kinds.
const (
	ChangeAdded   = "added"
	ChangeRemoved = "removed"
	ChangeChanged = "changed"
)

// Diff lists the rules that differ from one policy to the next, in the order of a policy
// document's fields; none when they are the same.
func Diff(from, to Rules) []Change {
	a, b := fields(from), fields(to)
	out := []Change{}
	for _, name := range ruleNames {
		x, y := a[name], b[name]
		if string(x) == string(y) {
			continue
		}
		c := Change{Rule: name, From: orNull(x), To: orNull(y)}
		switch {
		case x == nil:
			c.Kind, c.Text = ChangeAdded, fmt.Sprintf("%s set to %s", name, y)
		case y == nil:
			c.Kind, c.Text = ChangeRemoved, fmt.Sprintf("%s removed (was %s)", name, x)
		default:
			c.Kind, c.Text = ChangeChanged, fmt.Sprintf("%s changed from %s to %s", name, x, y)
		}
		var xs, ys []json.RawMessage
		if json.Unmarshal(c.From, &xs) == nil && json.Unmarshal(c.To, &ys) == nil && (xs != nil || ys != nil) {
			c.Added, c.Removed = missing(ys, xs), missing(xs, ys)
			var parts []string
			for _, e := range c.Added {
				parts = append(parts, "+"+string(e))
			}
			for _, e := range c.Removed {
				parts = append(parts, "-"+string(e))
			}
			if c.Kind == ChangeChanged && len(parts) > 0 {
				c.Text = fmt.Sprintf("%s: %s", name, strings.Join(parts, ", "))
			}
		}
		out = append(out, c)
	}
	return out
}

// fields is each rule of a policy as compact JSON, absent when the policy leaves it out.
func fields(r Rules) map[string]json.RawMessage {
	doc, _ := json.Marshal(r) // Rules always encode
	var m map[string]json.RawMessage
	_ = json.Unmarshal(doc, &m)
	return m
}

func orNull(raw json.RawMessage) json.RawMessage {
	if raw == nil {
		return json.RawMessage("null")
	}
	return raw
}

// missing lists the entries of xs that ys does not hold.
func missing(xs, ys []json.RawMessage) []json.RawMessage {
	var out []json.RawMessage
	for _, x := range xs {
		if !slices.ContainsFunc(ys, func(y json.RawMessage) bool { return string(x) == string(y) }) {
			out = append(out, x)
		}
	}
	return out
}
