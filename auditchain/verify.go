package auditchain

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Reason says why a chain breaks at an entry.
type Reason string

const (
	// SeqGap: the entry's seq does not follow the one before it: entries are missing
	// before it, or it is out of order.
	SeqGap Reason = "seq_gap"
	// HashMismatch: the entry's fields do not hash to its hash: it was altered.
	HashMismatch Reason = "hash_mismatch"
	// PrevHashMismatch: the entry's prevHash is not the hash of the entry before it: that
	// entry was altered and its hash recomputed, or one was put in the other's place.
	PrevHashMismatch Reason = "prev_hash_mismatch"
	// HeadMismatch: the run does not reach the head it must reach (entries are missing at
	// its end), or its entry at the head's seq has another hash.
	HeadMismatch Reason = "head_mismatch"
	// Malformed: a line that is not an entry, or an entry whose details are not JSON.
	Malformed Reason = "malformed"
)

// Break is the first place where a run of entries stops being a chain.
type Break struct {
	// Seq and ID are the entry at which it breaks: the first that does not fit. When
	// entries are missing at the end, Seq is the first missing one and ID is empty.
	Seq    int64  `json:"seq"`
	ID     string `json:"id"`
	Reason Reason `json:"reason"`
	// Detail says what was expected, for a person.
	Detail string `json:"detail"`
	// Line is the entry's line in a file read by ReadJSONL (from 1); 0 otherwise.
	Line int `json:"-"`
}

func (b *Break) Error() string {
	var at []string
	if b.Seq > 0 {
		seq := fmt.Sprintf("seq %d", b.Seq)
		if b.ID != "" {
			seq += " (" + b.ID + ")"
		}
		at = append(at, seq)
	}
	if b.Line > 0 {
		at = append(at, fmt.Sprintf("line %d", b.Line))
	}
	if len(at) == 0 {
		return fmt.Sprintf("broken: %s: %s", b.Reason, b.Detail)
	}
	return fmt.Sprintf("broken at %s: %s: %s", strings.Join(at, ", "), b.Reason, b.Detail)
}

// Result is what verifying a run found.
type Result struct {
	// Entries is how many entries were read, the broken one included.
	Entries int64
	// First is the seq the run starts at (0 for an empty run); Head its last entry.
	First int64
	Head  *Head
	// Broken is the first break, nil when the run is intact.
	Broken *Break
}

// Verifier checks a run of entries fed to it in order. The zero Verifier checks any run
// of consecutive entries: its first entry's link to the one before is taken on trust,
// unless FromGenesis.
type Verifier struct {
	// FromGenesis requires the run to start at the chain's first entry: seq 1, whose
	// prevHash is Genesis.
	FromGenesis bool
	// Want, when set, is a head the run must reach: a chain head read earlier (one you
	// kept, or the stored head), whose seq's entry must carry its hash.
	Want *Head
	// After, when set, is the last entry of a run verified before, which this run goes on
	// from: its first entry must follow After's seq and link to After's hash. A long chain
	// is checked in pieces so.
	After *Head

	res     Result
	reached bool
}

// Add checks the next entry of the run and returns the run's first break so far.
func (v *Verifier) Add(e *Entry) *Break {
	if v.res.Broken != nil {
		return v.res.Broken
	}
	v.res.Entries++
	if b := v.check(e); b != nil {
		v.res.Broken = b
		return b
	}
	if v.res.Head == nil {
		v.res.First = e.Seq
	}
	v.res.Head = &Head{Seq: e.Seq, Hash: e.Hash}
	return nil
}

func (v *Verifier) check(e *Entry) *Break {
	broken := func(r Reason, format string, args ...any) *Break {
		return &Break{Seq: e.Seq, ID: e.ID, Reason: r, Detail: fmt.Sprintf(format, args...)}
	}
	prev := v.res.Head
	if prev == nil {
		prev = v.After
	}
	switch {
	case e.Seq < 1:
		return broken(Malformed, "seq %d: an entry's seq counts from 1", e.Seq)
	case prev == nil && v.FromGenesis && e.Seq != 1:
		return broken(SeqGap, "the chain starts at seq %d: entries 1 to %d are missing", e.Seq, e.Seq-1)
	case prev != nil && e.Seq <= prev.Seq:
		return broken(SeqGap, "seq %d follows seq %d: out of order", e.Seq, prev.Seq)
	case prev != nil && e.Seq != prev.Seq+1:
		return broken(SeqGap, "seq %d follows seq %d: %s missing here (deleted, or out of order)", e.Seq, prev.Seq, between(prev.Seq, e.Seq))
	}
	hash, err := Hash(e)
	if err != nil {
		return broken(Malformed, "%v", err)
	}
	if hash != e.Hash {
		return broken(HashMismatch, "its fields hash to %s, not to its hash %s: the entry was altered", hash, e.Hash)
	}
	switch {
	case prev != nil && e.PrevHash != prev.Hash:
		return broken(PrevHashMismatch, "its prevHash %s is not the hash %s of seq %d: that entry or this one was replaced", e.PrevHash, prev.Hash, prev.Seq)
	case e.Seq == 1 && e.PrevHash != Genesis:
		return broken(PrevHashMismatch, "the first entry's prevHash is %s, not the genesis hash (64 zeros)", e.PrevHash)
	}
	if w := v.Want; w != nil && e.Seq == w.Seq {
		if e.Hash != w.Hash {
			return broken(HeadMismatch, "the head to reach is %s at seq %d; this entry's hash is %s", w.Hash, w.Seq, e.Hash)
		}
		v.reached = true
	}
	return nil
}

// between names the entries missing between seq a and seq b.
func between(a, b int64) string {
	if b-a == 2 {
		return fmt.Sprintf("entry %d is", a+1)
	}
	return fmt.Sprintf("entries %d to %d are", a+1, b-1)
}

// Result ends the run: it checks that the run reached Want, and says what was found.
func (v *Verifier) Result() Result {
	res := v.res
	if w := v.Want; res.Broken == nil && w != nil && !v.reached {
		last := int64(0)
		if v.After != nil {
			last = v.After.Seq
		}
		if res.Head != nil {
			last = res.Head.Seq
		}
		if last < w.Seq {
			res.Broken = &Break{Seq: last + 1, Reason: HeadMismatch,
				Detail: fmt.Sprintf("the run ends at seq %d, before the head at seq %d: %s missing", last, w.Seq, between(last, w.Seq+1))}
		} else {
			res.Broken = &Break{Seq: w.Seq, Reason: HeadMismatch,
				Detail: fmt.Sprintf("the run starts after the head at seq %d", w.Seq)}
		}
	}
	return res
}

// ReadJSONL verifies a run written one entry a line (what GET /audit-logs/export
// answers; several exports of consecutive runs, concatenated, are one run). Blank lines
// are skipped. A line that is not an entry, or has a field an entry does not, breaks the
// run as Malformed: a field outside the hash would be unprotected. The error is the
// reader's.
func ReadJSONL(r io.Reader, v *Verifier) (Result, error) {
	br := bufio.NewReader(r)
	for line := 1; ; line++ {
		text, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(text)) > 0 {
			var b *Break
			if e, bad := decodeLine(text); bad != nil {
				b = v.breakAt(&Break{Seq: e.Seq, ID: e.ID, Reason: Malformed, Detail: bad.Error()})
			} else {
				b = v.Add(e)
			}
			if b != nil {
				b.Line = line
				return v.Result(), nil
			}
		}
		if errors.Is(err, io.EOF) {
			return v.Result(), nil
		}
		if err != nil {
			return v.Result(), err
		}
	}
}

// breakAt records b as the break of an entry Add could not be given.
func (v *Verifier) breakAt(b *Break) *Break {
	if v.res.Broken != nil {
		return v.res.Broken
	}
	v.res.Entries++
	v.res.Broken = b
	return b
}

// decodeLine reads one line's entry, and what makes it no entry.
func decodeLine(text []byte) (*Entry, error) {
	var e Entry
	d := json.NewDecoder(bytes.NewReader(text))
	d.DisallowUnknownFields()
	if err := d.Decode(&e); err != nil {
		return &e, err
	}
	if _, err := d.Token(); err != io.EOF {
		return &e, errors.New("more than one JSON value on the line")
	}
	if e.ID == "" || len(e.Details) == 0 || e.CreatedAt.IsZero() || e.Hash == "" {
		return &e, errors.New("an entry needs at least seq, id, details, createdAt and hash")
	}
	return &e, nil
}
