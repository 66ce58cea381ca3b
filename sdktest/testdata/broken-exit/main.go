// Command broken is a process extension that exits before it serves, as one with a missing
// setting would: the harness must fail fast and show what it printed.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "broken: BROKEN_LEDGER_URL is not set")
	os.Exit(3)
}
