package agents

import (
	"context"
	"fmt"

	"github.com/keelhq/keel/sdk"
)

// engine is the heartbeat engine. This placeholder is replaced by heartbeat*.go.
type engine struct{ a *Agents }

func newEngine(a *Agents) *engine { return &engine{a: a} }

func (e *engine) runJob(_ context.Context, job *sdk.JobRun) error {
	return fmt.Errorf("unknown job %s", job.Key)
}

func (e *engine) stop(context.Context) {}
