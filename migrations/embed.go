// Package migrations holds the kernel's SQL migrations (line "main"), embedded in the
// binary and applied at start in file-name order. Each extension embeds its own line.
package migrations

import "embed"

// FS holds the kernel migrations, named NNNN_description.up.sql.
//
//go:embed *.sql
var FS embed.FS
