// Command summary prints the headline figures the bench programs of one `make bench` run
// added to the file named by BENCH_SUMMARY (devbundle.Summarize), as one Markdown table in
// the order they were measured.
//
//	go run ./dev/bench/summary .bench-summary.tsv
package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: summary <file>")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer f.Close()
	fmt.Println()
	fmt.Println("Every target beside its figure, this run (each ratio from one program's same-run reference):")
	fmt.Println()
	fmt.Println("| what | figure | reference | ratio | target | |")
	fmt.Println("| --- | --- | --- | --- | --- | --- |")
	rows, missed := 0, 0
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		cells := strings.Split(lines.Text(), "\t")
		if len(cells) != 6 {
			continue
		}
		rows++
		if cells[5] == "missed" {
			missed++
		}
		fmt.Printf("| %s |\n", strings.Join(cells, " | "))
	}
	if err := lines.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("\n%d rows, %d missed.\n", rows, missed)
}
