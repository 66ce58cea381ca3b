package work

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
)

// Provided methods the heartbeat engine reads on its hot path (every wake for an issue):
// one indexed row, no view assembly.
func init() {
	addMethods(map[string]method{
		"issues.locks": {
			ReadOnly: true,
			Description: "Read what decides whether a wake for an issue may run: input {id} (UUID or identifier) of an issue of " +
				"the call's company. Output: {found, id, status, executionRunId, checkoutRunId, projectId}; found is false " +
				"for an unknown issue or one of another company.",
			Call: (*Work).methodIssuesLocks,
		},
	})
}

// IssueLocks is the output of work.issues.locks.
type IssueLocks struct {
	Found          bool    `json:"found"`
	ID             string  `json:"id,omitempty"`
	Status         string  `json:"status,omitempty"`
	ExecutionRunID *string `json:"executionRunId"`
	CheckoutRunID  *string `json:"checkoutRunId"`
	ProjectID      *string `json:"projectId"`
}

func (w *Work) methodIssuesLocks(ctx context.Context, call *sdk.MethodCall) (any, error) {
	var in struct {
		ID string `json:"id"`
	}
	if err := issuesMethodDecode(call, &in); err != nil {
		return nil, err
	}
	companyID, err := routineMethodCompany(call)
	if err != nil {
		return nil, err
	}
	ref := strings.TrimSpace(in.ID)
	if ref == "" {
		return nil, invalid("id", "is required")
	}
	column := "upper(identifier)"
	if isUUID(ref) {
		column, ref = "id", strings.ToLower(ref)
	} else {
		ref = strings.ToUpper(ref)
	}
	out := &IssueLocks{}
	err = w.pool.QueryRow(ctx, `SELECT id::text, status, execution_run_id, checkout_run_id, project_id::text FROM issues
		WHERE company_id = $1 AND `+column+` = $2`, companyID, ref).
		Scan(&out.ID, &out.Status, &out.ExecutionRunID, &out.CheckoutRunID, &out.ProjectID)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return &IssueLocks{}, nil
	case err != nil:
		return nil, fmt.Errorf("error reading issue locks: %w", err)
	}
	out.Found = true
	return out, nil
}
