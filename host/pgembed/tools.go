package pgembed

import (
	"fmt"
	"path/filepath"
)

// Tool returns the path of a PostgreSQL client program (pg_dump, pg_restore) from the
// binaries the embedded cluster runs on: binDir when set, else as Config.BinDir is
// resolved ($SERVICE_PG_BIN_DIR, the newest /usr/lib/postgresql/*/bin, $PATH).
func Tool(binDir, name string) (string, error) {
	dir, err := findBinDir(binDir)
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, name)
	if !isExecutable(p) {
		return "", fmt.Errorf("%s not found beside the postgresql server binaries in %s: install the postgresql client package of the same version", name, dir)
	}
	return p, nil
}
