package agents

import (
	"context"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/migrate"
)

// eventCompanyDeleted is the kernel's event for a deleted company: every owner purges the
// company's rows and files, so a delete leaves nothing behind.
const eventCompanyDeleted = "company.deleted"

// OnEvent handles the events the extension subscribes to: a deleted company is purged.
func (a *Agents) OnEvent(ctx context.Context, ev *sdk.Event) error {
	if ev.Type == eventCompanyDeleted && ev.From("kernel") && ev.CompanyID != "" {
		return a.purgeCompany(ctx, ev.CompanyID)
	}
	return nil
}

// purgeCompany deletes every row and file of a deleted company; it is idempotent, as
// at-least-once delivery needs.
func (a *Agents) purgeCompany(ctx context.Context, companyID string) error {
	// Run logs live on disk under the run's id; collect them before the rows go.
	rows, err := a.pool.Query(ctx, `SELECT id::text FROM heartbeat_runs WHERE company_id::text = $1`, companyID)
	if err != nil {
		return fmt.Errorf("error listing the runs of company %s: %w", companyID, err)
	}
	runIDs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("error listing the runs of company %s: %w", companyID, err)
	}
	if _, err := migrate.PurgeCompany(ctx, a.pool, Schema, companyID); err != nil {
		return err
	}
	for _, id := range runIDs {
		if err := os.Remove(a.runLogPath(id)); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("error removing the log of run %s: %w", id, err)
		}
	}
	return nil
}
