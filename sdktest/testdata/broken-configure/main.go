// Command broken is a process extension whose Configure always fails, after logging why:
// the harness must fail fast with that error and log line.
package main

import (
	"context"
	_ "embed"
	"errors"

	"github.com/keelhq/keel/sdk"
)

//go:embed manifest.json
var manifestJSON []byte

type broken struct{ m *sdk.Manifest }

func (b *broken) Manifest() *sdk.Manifest { return b.m }

func (b *broken) Configure(_ context.Context, env *sdk.Env) error {
	env.Logger.Error("the ledger file is unreadable", "path", "/nonexistent/ledger")
	return errors.New("ledger unavailable")
}

func main() {
	m, err := sdk.ParseManifest(manifestJSON)
	if err != nil {
		panic(err)
	}
	sdk.Serve(&broken{m: m})
}
