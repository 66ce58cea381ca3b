package kernel

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// AdapterSetting is the operator state of one adapter type (kernel.adapter_settings).
type AdapterSetting struct {
	Type string
	// OverridePaused sends new runs of the type back to the built-in while an override is
	// installed.
	OverridePaused bool
	// Disabled hides the type from creation menus; existing agents still run on it.
	Disabled bool
}

// AdapterSettingGet returns the state of one adapter type; a type never changed has the
// zero state.
func (k *Kernel) AdapterSettingGet(ctx context.Context, adapterType string) (*AdapterSetting, error) {
	s := &AdapterSetting{Type: adapterType}
	err := k.Pool.QueryRow(ctx, `SELECT override_paused, disabled FROM kernel.adapter_settings WHERE adapter_type = $1`,
		adapterType).Scan(&s.OverridePaused, &s.Disabled)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("error reading adapter settings of %s: %w", adapterType, err)
	}
	return s, nil
}

// AdapterSettingList returns the state of every adapter type that has one, by type.
func (k *Kernel) AdapterSettingList(ctx context.Context) (map[string]*AdapterSetting, error) {
	rows, err := k.Pool.Query(ctx, `SELECT adapter_type, override_paused, disabled FROM kernel.adapter_settings`)
	if err != nil {
		return nil, fmt.Errorf("error listing adapter settings: %w", err)
	}
	defer rows.Close()
	out := map[string]*AdapterSetting{}
	for rows.Next() {
		s := &AdapterSetting{}
		if err := rows.Scan(&s.Type, &s.OverridePaused, &s.Disabled); err != nil {
			return nil, fmt.Errorf("error listing adapter settings: %w", err)
		}
		out[s.Type] = s
	}
	return out, rows.Err()
}

// AdapterSettingSetPaused records whether a type's override is paused and reports whether
// that changed anything.
func (k *Kernel) AdapterSettingSetPaused(ctx context.Context, adapterType string, paused bool) (bool, error) {
	return k.adapterSettingSet(ctx, adapterType, "override_paused", paused)
}

// AdapterSettingSetDisabled records whether a type is disabled and reports whether that
// changed anything.
func (k *Kernel) AdapterSettingSetDisabled(ctx context.Context, adapterType string, disabled bool) (bool, error) {
	return k.adapterSettingSet(ctx, adapterType, "disabled", disabled)
}

// adapterSettingSet sets one boolean column of a type's row (column is a constant of this
// file, never input) and reports whether its value changed.
func (k *Kernel) adapterSettingSet(ctx context.Context, adapterType, column string, value bool) (bool, error) {
	var before *bool
	err := k.Pool.QueryRow(ctx, `WITH old AS (SELECT `+column+` AS v FROM kernel.adapter_settings WHERE adapter_type = $1)
		INSERT INTO kernel.adapter_settings (adapter_type, `+column+`) VALUES ($1, $2)
		ON CONFLICT (adapter_type) DO UPDATE SET `+column+` = excluded.`+column+`, updated_at = now()
		RETURNING (SELECT v FROM old)`, adapterType, value).Scan(&before)
	if err != nil {
		return false, fmt.Errorf("error recording %s of adapter %s: %w", column, adapterType, err)
	}
	if before == nil {
		return value, nil // the default of both columns is false
	}
	return *before != value, nil
}
