// Command genschema writes sdk/manifest.schema.json from the Go manifest types. Run it from
// the sdk directory (make proto does).
package main

import (
	"fmt"
	"os"

	"github.com/keelhq/keel/sdk"
)

func main() {
	b, err := sdk.GenerateManifestSchema()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile("manifest.schema.json", b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
