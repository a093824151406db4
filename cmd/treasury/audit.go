package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"

	"github.com/opentreasury/treasury/auditchain"
	"github.com/opentreasury/treasury/internal/assemble"
)

// auditFlags are the flags of treasury audit verify.
var auditFlags struct{ head string }

// usageError is a command line the command cannot run: exit status 2, as for a flag
// that does not parse.
type usageError string

func (e usageError) Error() string { return string(e) }

// headFlag reads SEQ:HASH.
var headFlag = regexp.MustCompile(`^([1-9][0-9]*):([0-9a-f]{64})$`)

// runAuditVerify verifies an export (GET /api/v1/audit-logs/export, one entry a line)
// with the code the service chains its records with. An intact file prints its count and
// head on stdout; a broken one names its first broken entry and exits 1.
func runAuditVerify(_ context.Context, _ assemble.Config, proc commandEnv) error {
	if len(proc.args) != 1 {
		return usageError("give one FILE: an export of GET /api/v1/audit-logs/export, or - for standard input")
	}
	v := &auditchain.Verifier{}
	if auditFlags.head != "" {
		m := headFlag.FindStringSubmatch(auditFlags.head)
		if m == nil {
			return usageError("--head is SEQ:HASH, the seq and the 64 lowercase hex digits of a chain head")
		}
		seq, _ := strconv.ParseInt(m[1], 10, 64)
		v.Want = &auditchain.Head{Seq: seq, Hash: m[2]}
	}
	in := proc.stdin
	if name := proc.args[0]; name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	res, err := auditchain.ReadJSONL(in, v)
	if err != nil {
		return fmt.Errorf("read %s: %w", proc.args[0], err)
	}
	if res.Broken != nil {
		return res.Broken
	}
	printIntact(proc.stdout, res)
	return nil
}

func printIntact(w io.Writer, res auditchain.Result) {
	if res.Head == nil {
		fmt.Fprintln(w, "intact: 0 entries (the file holds none)")
		return
	}
	fmt.Fprintf(w, "intact: %d entries, head %d %s\n", res.Entries, res.Head.Seq, res.Head.Hash)
	if res.First > 1 {
		fmt.Fprintf(w, "(from seq %d: its link to the entry before it is not in the file, and not checked)\n", res.First)
	}
}
