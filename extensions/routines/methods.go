package routines

import (
	"context"
	"strings"
	"time"

	"github.com/keelhq/keel/sdk"
)

func init() {
	addMethods(map[string]method{
		"tick": {
			Description: "Run the schedule ticker at an instant (kernel and system callers only). Input {now: RFC 3339, default the " +
				"wall clock}. Output {now, claimed, runs: [{id, routineId, triggerId, status, scheduledFor}], recovered}.",
			Call: (*Routines).methodTick,
		},
	})
}

func (x *Routines) methodTick(ctx context.Context, call *sdk.MethodCall) (any, error) {
	if call.Caller != "kernel" && (call.Actor == nil || call.Actor.Type != "system") {
		return nil, forbidden("Only the kernel or the system may tick routines")
	}
	var in struct {
		Now string `json:"now"`
	}
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	now := time.Now()
	if s := strings.TrimSpace(in.Now); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return nil, invalid("now", "must be an RFC 3339 time")
		}
		now = t
	}
	return x.tick(ctx, now)
}
