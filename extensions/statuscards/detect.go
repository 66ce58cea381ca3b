package statuscards

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/keelhq/keel/sdk"
)

func init() {
	addMethods(map[string]method{
		"detect": {
			Description: "Run change detection for a card without queueing anything (kernel and system callers only; " +
				"benchmarks and diagnostics). Input {cardId, snapshot? (store the current watched set as the card's " +
				"fingerprint)}. Output {watched, changes, byKind}.",
			Call: (*StatusCards).methodDetect,
		},
	})
}

// Detection is the answer of statuscards.detect.
type Detection struct {
	Watched int            `json:"watched"`
	Changes int            `json:"changes"`
	ByKind  map[string]int `json:"byKind"`
}

func (x *StatusCards) methodDetect(ctx context.Context, call *sdk.MethodCall) (any, error) {
	if call.Caller != "kernel" && (call.Actor == nil || call.Actor.Type != "system") {
		return nil, sdk.Forbidden("Only the kernel or the system may run change detection")
	}
	var in struct {
		CardID   string `json:"cardId"`
		Snapshot bool   `json:"snapshot"`
	}
	if err := call.Bind(&in); err != nil {
		return nil, err
	}
	c, err := cardGet(ctx, x.pool, in.CardID)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, sdk.NotFound(msgCardNotFound)
	}
	return x.detect(ctx, c, in.Snapshot)
}

// detect diffs a card's watched set against its fingerprint, optionally storing the new one.
func (x *StatusCards) detect(ctx context.Context, c *Card, snapshot bool) (*Detection, error) {
	fp, err := x.watch(ctx, c)
	if err != nil {
		return nil, err
	}
	changes := diff(c.Fingerprint, fp)
	out := &Detection{Watched: len(fp), Changes: len(changes), ByKind: map[string]int{}}
	for _, ch := range changes {
		out.ByKind[ch.ChangeKind]++
	}
	if snapshot {
		b, err := json.Marshal(fp)
		if err != nil {
			return nil, fmt.Errorf("error encoding fingerprint: %w", err)
		}
		if _, err := x.pool.Exec(ctx, `UPDATE status_cards SET fingerprint = $2, fingerprint_at = now() WHERE id = $1`, c.ID, b); err != nil {
			return nil, fmt.Errorf("error storing the fingerprint of status card %s: %w", c.ID, err)
		}
	}
	return out, nil
}
