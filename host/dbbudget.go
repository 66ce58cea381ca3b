package host

import (
	"fmt"

	"github.com/keelhq/keel/host/supervisor"
	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/migrate"
)

// instanceConnLimit bounds the PostgreSQL connections of one keel instance: the embedded
// server allows 200 (pgembed), which leaves room for the CLI, a second node and tests.
const instanceConnLimit = 100

// ConnBudget is how many PostgreSQL connections one keel instance may hold at once: the
// kernel's pool (shared with the job queue) and one pool for each extension with the
// database capability. Pools open connections on demand and close them after a short
// idle time, so an idle instance holds few of them; the budget bounds a busy one. Every
// backend costs PostgreSQL memory of its own, and a machine serves no more queries at
// once than it has cores, so the budget is a small multiple of the cores.
type ConnBudget struct {
	// Cores is the CPU count the budget was sized for.
	Cores int
	// Kernel is the kernel pool's limit (the job queue shares it).
	Kernel int32
	// Extension is each extension's pool limit, handed to it by the host.
	Extension int32
	// Extensions is how many extensions with the database capability were loaded at start.
	Extensions int
}

// NewConnBudget sizes the budget for a machine with cores CPUs and dbExtensions extensions
// with the database capability: the kernel gets 4 connections a core (at least 16, at most
// 32: the job queue and the start-up of every extension draw on it at once), each
// extension sdk/migrate's ExtensionPoolSize (2 a core, at least 4, at most 16), less when
// the extensions would together pass the instance's limit, but never under 2.
func NewConnBudget(cores, dbExtensions int) ConnBudget {
	b := ConnBudget{Cores: cores, Kernel: int32(min(max(4*cores, 16), 32)), Extension: migrate.ExtensionPoolSize(cores), Extensions: dbExtensions}
	if dbExtensions > 0 {
		share := (instanceConnLimit - int(b.Kernel)) / dbExtensions
		b.Extension = int32(max(min(int(b.Extension), share), 2))
	}
	return b
}

// Total is the most connections the instance holds at once with the extensions loaded at
// start; each extension installed later adds Extension more.
func (b ConnBudget) Total() int { return int(b.Kernel) + b.Extensions*int(b.Extension) }

// String says the budget in one line, as keel prints it at start.
func (b ConnBudget) String() string {
	return fmt.Sprintf("database connections: at most %d (kernel and job queue %d, %d extensions × %d; %d cores)",
		b.Total(), b.Kernel, b.Extensions, b.Extension, b.Cores)
}

// countDatabaseExtensions counts the sources whose manifest asks for the database capability.
func countDatabaseExtensions(sources []*supervisor.Source) int {
	n := 0
	for _, src := range sources {
		if src.Manifest != nil && src.Manifest.HasCapability(sdk.CapDatabase) {
			n++
		}
	}
	return n
}
