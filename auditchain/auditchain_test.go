package auditchain

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/opentreasury/treasury/internal/events"
)

// example is the entry docs/audit.md works through, with its details written loosely:
// the hash covers them canonically.
func example() Entry {
	return Entry{Seq: 1, OrgID: "org_0192f7c4a1b27d3e8f4a5b6c7d8e9f01", Record: Record{ID: "aud_0192f7c4a1b27d3e8f4a5b6c7d8e9f1d", App: "pay",
		Actor: Actor{ID: "key_0192f7c4a1b27d3e8f4a5b6c7d8e9f04", Type: "key"}, Action: "payment.created",
		ResourceType: "order", ResourceID: "ord_0192f7c4a1b27d3e8f4a5b6c7d8e9f10", CorrelationID: "payout-run-42",
		Details: json.RawMessage(`{"asset": "USDC", "amount": "500",
			"destination": {"label": "Supplier", "address": "0x1111111111111111111111111111111111111111"}}`),
		CreatedAt: events.TimeOf(time.Date(2026, 11, 22, 1, 24, 34, 123456789, time.UTC))}, PrevHash: Genesis}
}

// The encoding restated by hand, as docs/audit.md states it; the hash is its SHA-256.
const (
	exampleCanonical = `["treasury.audit.v1",1,"aud_0192f7c4a1b27d3e8f4a5b6c7d8e9f1d","org_0192f7c4a1b27d3e8f4a5b6c7d8e9f01",` +
		`"pay","key","key_0192f7c4a1b27d3e8f4a5b6c7d8e9f04","payment.created","order","ord_0192f7c4a1b27d3e8f4a5b6c7d8e9f10",` +
		`"payout-run-42",{"amount":"500","asset":"USDC","destination":{"address":"0x1111111111111111111111111111111111111111",` +
		`"label":"Supplier"}},"2026-11-22T01:24:34.123Z","0000000000000000000000000000000000000000000000000000000000000000"]`
	exampleHash = "5b6608677df1e72a75873e852b5a9086d71fe8187d9960eb18008820270f3d27"
)

func TestTheHashIsTheSHA256OfTheDocumentedEncoding(t *testing.T) {
	e := example()
	got, err := Canonical(&e)
	if err != nil || string(got) != exampleCanonical {
		t.Fatalf("Canonical:\n got %s (%v)\nwant %s", got, err, exampleCanonical)
	}
	sum := sha256.Sum256([]byte(exampleCanonical))
	if hex.EncodeToString(sum[:]) != exampleHash {
		t.Fatalf("the example's hash is %x", sum)
	}
	if h, err := Hash(&e); err != nil || h != exampleHash {
		t.Fatalf("Hash = %s, %v", h, err)
	}
	// docs/audit.md shows the same example, so a verifier written from it can be checked.
	doc, err := os.ReadFile("../docs/audit.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{exampleCanonical, exampleHash} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("docs/audit.md does not show %s", want)
		}
	}
}

func TestCanonicalJSON(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{ "b" : 1 , "a" : [ true, false, null ] }`, `{"a":[true,false,null],"b":1}`},
		{`{"n": 1.50, "e": 1E3, "neg": -0}`, `{"e":1E3,"n":1.50,"neg":-0}`},
		{`"\u003c\u0026\u003e \/ \u2028 é \u00e9"`, "\"<&> / \u2028 é é\""},
		{`"\u0000\u001f\b\f\n\r\t\"\\"`, `"\u0000\u001f\b\f\n\r\t\"\\"`},
		{`{"k": 1, "k": 2}`, `{"k":2}`},
		{`{"é": 1, "z": 2, "A": 3}`, `{"A":3,"z":2,"é":1}`},
		{" {}\n", `{}`},
	} {
		got, err := CanonicalJSON([]byte(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("CanonicalJSON(%s) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{``, `{`, `{} {}`, `{"a":1}x`} {
		if got, err := CanonicalJSON([]byte(bad)); err == nil {
			t.Errorf("CanonicalJSON(%q) = %s, want an error", bad, got)
		}
	}
	if got := DetailsOf("not json"); string(got) != `"not json"` {
		t.Errorf("DetailsOf(not json) = %s", got)
	}
}

// chain makes n entries of one organisation, linked.
func chain(t *testing.T, n int) []Entry {
	t.Helper()
	out := make([]Entry, n)
	prev := Genesis
	for i := range out {
		e := example()
		e.Seq, e.ID, e.PrevHash = int64(i+1), fmt.Sprintf("aud_%d", i+1), prev
		e.Details = json.RawMessage(fmt.Sprintf(`{"n": %d, "note": "<b>&\u2028"}`, i))
		e.CreatedAt = events.TimeOf(e.CreatedAt.Add(time.Duration(i) * time.Second))
		h, err := Hash(&e)
		if err != nil {
			t.Fatal(err)
		}
		e.Hash, prev = h, h
		out[i] = e
	}
	return out
}

func verify(v *Verifier, entries []Entry) Result {
	for i := range entries {
		v.Add(&entries[i])
	}
	return v.Result()
}

func TestVerifierFindsTheFirstBrokenEntry(t *testing.T) {
	for _, c := range []struct {
		name   string
		tamper func(es []Entry) []Entry
		// want is the break: seq, id, reason; seq 0 for an intact run.
		seq    int64
		id     string
		reason Reason
	}{
		{name: "intact", tamper: func(es []Entry) []Entry { return es }},
		{name: "details edited", seq: 3, id: "aud_3", reason: HashMismatch, tamper: func(es []Entry) []Entry {
			es[2].Details = json.RawMessage(`{"n": 99}`)
			return es
		}},
		{name: "time edited", seq: 2, id: "aud_2", reason: HashMismatch, tamper: func(es []Entry) []Entry {
			es[1].CreatedAt = events.TimeOf(es[1].CreatedAt.Add(time.Millisecond))
			return es
		}},
		{name: "edited and rehashed", seq: 4, id: "aud_4", reason: PrevHashMismatch, tamper: func(es []Entry) []Entry {
			es[2].Action = "nothing.happened"
			es[2].Hash, _ = Hash(&es[2])
			return es
		}},
		{name: "deleted", seq: 4, id: "aud_4", reason: SeqGap, tamper: func(es []Entry) []Entry {
			return append(es[:2:2], es[3:]...)
		}},
		{name: "two swapped", seq: 5, id: "aud_5", reason: SeqGap, tamper: func(es []Entry) []Entry {
			es[3], es[4] = es[4], es[3]
			return es
		}},
		{name: "two swapped, seqs too", seq: 4, id: "aud_5", reason: HashMismatch, tamper: func(es []Entry) []Entry {
			es[3], es[4] = es[4], es[3]
			es[3].Seq, es[4].Seq = 4, 5
			return es
		}},
		{name: "the first deleted", seq: 2, id: "aud_2", reason: SeqGap, tamper: func(es []Entry) []Entry { return es[1:] }},
		{name: "the last deleted", seq: 6, reason: HeadMismatch, tamper: func(es []Entry) []Entry { return es[:5] }},
		{name: "the first's link edited", seq: 1, id: "aud_1", reason: PrevHashMismatch, tamper: func(es []Entry) []Entry {
			es[0].PrevHash = strings.Repeat("1", 64)
			es[0].Hash, _ = Hash(&es[0])
			return es
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			es := chain(t, 6)
			want := es[5]
			res := verify(&Verifier{FromGenesis: true, Want: &Head{Seq: want.Seq, Hash: want.Hash}}, c.tamper(es))
			b := res.Broken
			switch {
			case c.seq == 0 && b != nil:
				t.Fatalf("intact run broken: %v", b)
			case c.seq == 0:
				if res.Entries != 6 || res.First != 1 || *res.Head != (Head{Seq: 6, Hash: want.Hash}) {
					t.Fatalf("result %+v", res)
				}
			case b == nil:
				t.Fatalf("tampering unnoticed: %+v", res)
			case b.Seq != c.seq || b.ID != c.id || b.Reason != c.reason:
				t.Fatalf("broken at seq %d (%s) %s: %s; want seq %d (%s) %s", b.Seq, b.ID, b.Reason, b.Detail, c.seq, c.id, c.reason)
			}
		})
	}
}

func TestAPartOfTheChainVerifiesOnItsOwn(t *testing.T) {
	es := chain(t, 6)
	res := verify(&Verifier{}, es[2:5])
	if res.Broken != nil || res.First != 3 || res.Head.Seq != 5 || res.Entries != 3 {
		t.Fatalf("a run from seq 3: %+v %v", res, res.Broken)
	}
	// From the genesis only.
	if res := verify(&Verifier{FromGenesis: true}, es[2:5]); res.Broken == nil || res.Broken.Reason != SeqGap {
		t.Fatalf("a run from seq 3 taken as the whole chain: %+v", res)
	}
	// A head it must reach: one kept from before, with more entries after it.
	if res := verify(&Verifier{Want: &Head{Seq: 4, Hash: es[3].Hash}}, es[2:5]); res.Broken != nil {
		t.Fatalf("the run reaches the kept head: %v", res.Broken)
	}
	if res := verify(&Verifier{Want: &Head{Seq: 4, Hash: es[2].Hash}}, es[2:5]); res.Broken == nil || res.Broken.Reason != HeadMismatch || res.Broken.Seq != 4 {
		t.Fatalf("another hash at the kept head's seq: %+v", res.Broken)
	}
	if res := verify(&Verifier{Want: &Head{Seq: 2, Hash: es[1].Hash}}, es[2:5]); res.Broken == nil || res.Broken.Reason != HeadMismatch {
		t.Fatalf("a run after the kept head: %+v", res.Broken)
	}
}

// A chain checked in pieces, each going on from the last entry of the one before, finds
// what one pass finds: a piece that does not link to it, or stops short of the head.
func TestAChainVerifiesInPieces(t *testing.T) {
	es := chain(t, 6)
	want := &Head{Seq: 6, Hash: es[5].Hash}
	first := verify(&Verifier{FromGenesis: true, Want: want}, es[:3])
	if first.Broken == nil || first.Broken.Reason != HeadMismatch || first.Head.Seq != 3 {
		t.Fatalf("a first piece on its own stops short of the head: %+v", first)
	}
	rest := verify(&Verifier{After: first.Head, Want: want}, es[3:])
	if rest.Broken != nil || rest.First != 4 || *rest.Head != *want || rest.Entries != 3 {
		t.Fatalf("the rest, after seq 3: %+v %v", rest, rest.Broken)
	}
	if res := verify(&Verifier{After: first.Head, Want: want}, es[4:]); res.Broken == nil || res.Broken.Seq != 5 || res.Broken.Reason != SeqGap {
		t.Fatalf("a piece that skips seq 4: %+v", res.Broken)
	}
	other := chain(t, 6) // the same seqs, other hashes
	other[3].PrevHash = strings.Repeat("2", 64)
	other[3].Hash, _ = Hash(&other[3])
	if res := verify(&Verifier{After: first.Head, Want: want}, other[3:4]); res.Broken == nil || res.Broken.Seq != 4 || res.Broken.Reason != PrevHashMismatch {
		t.Fatalf("a piece linked to another entry: %+v", res.Broken)
	}
	if res := verify(&Verifier{After: first.Head, Want: want}, nil); res.Broken == nil || res.Broken.Seq != 4 || res.Broken.Reason != HeadMismatch {
		t.Fatalf("an empty piece after seq 3: %+v", res.Broken)
	}
}

// An export written by encoding/json, "<" escaped or not, verifies line by line; a line
// that is not an entry, or carries a field outside the hash, breaks the run there.
func TestReadJSONL(t *testing.T) {
	es := chain(t, 4)
	var plain, escaped bytes.Buffer
	enc := json.NewEncoder(&plain)
	enc.SetEscapeHTML(false)
	for i := range es {
		_ = enc.Encode(&es[i])
		_ = json.NewEncoder(&escaped).Encode(&es[i])
		if i == 1 {
			plain.WriteString("\n") // a blank line
		}
	}
	for name, file := range map[string]string{"plain": plain.String(), "escaped": escaped.String()} {
		res, err := ReadJSONL(strings.NewReader(file), &Verifier{FromGenesis: true})
		if err != nil || res.Broken != nil || res.Entries != 4 || res.Head.Hash != es[3].Hash {
			t.Errorf("%s: %+v %v %v", name, res, res.Broken, err)
		}
	}
	lines := strings.Split(strings.TrimSpace(escaped.String()), "\n")
	for name, c := range map[string]struct {
		line   string
		reason Reason
	}{
		"not JSON":      {"{not json", Malformed},
		"unknown field": {strings.Replace(lines[2], `{"seq":3,`, `{"seq":3,"approvedBy":"someone",`, 1), Malformed},
		"no hash":       {strings.Replace(lines[2], `"hash":"`+es[2].Hash+`"`, `"x":1`, 1), Malformed},
		"two values":    {lines[2] + " {}", Malformed},
		"edited":        {strings.Replace(lines[2], `"n":2`, `"n":3`, 1), HashMismatch},
	} {
		file := strings.Join([]string{lines[0], lines[1], c.line, lines[3]}, "\n")
		res, err := ReadJSONL(strings.NewReader(file), &Verifier{FromGenesis: true})
		if err != nil || res.Broken == nil || res.Broken.Reason != c.reason || res.Broken.Line != 3 || res.Entries != 3 {
			t.Errorf("%s: %+v %+v %v", name, res, res.Broken, err)
		}
	}
}
