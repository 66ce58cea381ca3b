package work

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/keelhq/keel/sdk"
	"github.com/keelhq/keel/sdk/migrate"
)

// eventCompanyDeleted is the kernel's event for a deleted company: every owner purges the
// company's rows and files, so a delete leaves nothing behind.
const eventCompanyDeleted = "company.deleted"

// OnEvent handles the events the extension subscribes to: a deleted company is purged.
func (w *Work) OnEvent(ctx context.Context, ev *sdk.Event) error {
	if ev.Type == eventCompanyDeleted && ev.From("kernel") && ev.CompanyID != "" {
		return w.purgeCompany(ctx, ev.CompanyID)
	}
	return nil
}

// purgeCompany deletes every row and file of a deleted company; it is idempotent, as
// at-least-once delivery needs.
func (w *Work) purgeCompany(ctx context.Context, companyID string) error {
	if _, err := migrate.PurgeCompany(ctx, w.pool, Schema, companyID); err != nil {
		return err
	}
	// Attachment bytes live under <dataDir>/attachments/<companyId>.
	if err := os.RemoveAll(filepath.Join(w.dataDir, "attachments", companyID)); err != nil {
		return fmt.Errorf("error removing the attachment files of company %s: %w", companyID, err)
	}
	return nil
}
