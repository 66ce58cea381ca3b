package costs

import (
	"context"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/migrate"
)

// eventCompanyDeleted is the kernel's event for a deleted company: every owner purges the
// company's rows and files, so a delete leaves nothing behind.
const eventCompanyDeleted = "company.deleted"

// OnEvent handles the events the extension subscribes to: a deleted company is purged.
func (c *Costs) OnEvent(ctx context.Context, ev *sdk.Event) error {
	if ev.Type == eventCompanyDeleted && ev.From("kernel") && ev.CompanyID != "" {
		return c.purgeCompany(ctx, ev.CompanyID)
	}
	return nil
}

// purgeCompany deletes every row and file of a deleted company; it is idempotent, as
// at-least-once delivery needs.
func (c *Costs) purgeCompany(ctx context.Context, companyID string) error {
	if _, err := migrate.PurgeCompany(ctx, c.pool, Schema, companyID); err != nil {
		return err
	}
	return nil
}
