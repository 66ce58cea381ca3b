package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/keelhq/keel/sdk"
)

// Per-space ingestion profiles: a space's settings.ingestion says whether the space takes
// event sources, which kinds, how large each may be (a profile can only lower the config's
// cap) and which issues it covers. The default space also takes events when the config's
// eventIngestion is on (with every kind and the config's cap), as before profiles.

// ingestionProfileFanOut bounds how many spaces one event is captured into.
const ingestionProfileFanOut = 25

// IngestionProfile is a space's settings.ingestion.
type IngestionProfile struct {
	// Enabled turns the space's event ingestion on.
	Enabled bool `json:"enabled"`
	// Sources picks the event kinds; omitted, every kind is taken.
	Sources *struct {
		Issues    *bool `json:"issues,omitempty"`
		Comments  *bool `json:"comments,omitempty"`
		Documents *bool `json:"documents,omitempty"`
	} `json:"sources,omitempty"`
	// MaxCharactersPerSource lowers the per-source cap (1000 up to the config's cap).
	MaxCharactersPerSource int `json:"maxCharactersPerSource,omitempty"`
	// Scope is company_all (default) or selected_projects (ProjectIDs).
	Scope      string   `json:"scope,omitempty"`
	ProjectIDs []string `json:"projectIds,omitempty"`
}

// checkIngestionSettings validates the ingestion profile in a space's settings, if any.
func checkIngestionSettings(settings json.RawMessage) error {
	var s map[string]json.RawMessage
	if len(settings) == 0 || json.Unmarshal(settings, &s) != nil {
		return nil // the caller reports a non-object
	}
	raw, ok := s["ingestion"]
	if !ok || string(raw) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var p IngestionProfile
	if err := dec.Decode(&p); err != nil {
		return sdk.Invalid("settings.ingestion", "must be {enabled, sources: {issues, comments, documents}, maxCharactersPerSource, scope, projectIds}: "+err.Error())
	}
	if p.MaxCharactersPerSource != 0 && (p.MaxCharactersPerSource < 1000 || p.MaxCharactersPerSource > 12000) {
		return sdk.Invalid("settings.ingestion.maxCharactersPerSource", "must be between 1000 and 12000 (the hard ingestion cap)")
	}
	switch p.Scope {
	case "", "company_all":
	case "selected_projects":
		if len(p.ProjectIDs) == 0 {
			return sdk.Invalid("settings.ingestion.projectIds", "selected_projects needs at least one project id")
		}
		for _, id := range p.ProjectIDs {
			if !sdk.IsUUID(id) {
				return sdk.Invalid("settings.ingestion.projectIds", "must be project ids (UUIDs)")
			}
		}
	default:
		return sdk.Invalid("settings.ingestion.scope", "must be company_all or selected_projects")
	}
	return nil
}

// takes reports whether the profile takes an event kind (issue, comment or document) of
// an issue in a project (nil: none).
func (p *IngestionProfile) takes(kind string, projectID *string) bool {
	if !p.Enabled {
		return false
	}
	if p.Sources != nil {
		var on *bool
		switch kind {
		case "issue":
			on = p.Sources.Issues
		case "comment":
			on = p.Sources.Comments
		case "document":
			on = p.Sources.Documents
		}
		if on != nil && !*on {
			return false
		}
	}
	if p.Scope == "selected_projects" {
		return projectID != nil && slices.Contains(p.ProjectIDs, *projectID)
	}
	return true
}

// ingestTarget is a space an event is captured into, with its per-source cap.
type ingestTarget struct {
	space *Space
	max   int
}

// ingestTargets returns the active spaces of the default wiki that take an event kind of an
// issue: the default space when the config's eventIngestion is on, and every space whose
// profile takes it (non-default spaces only when shared).
func (w *Wiki) ingestTargets(ctx context.Context, companyID, kind string, projectID *string) ([]ingestTarget, error) {
	cfg := w.cfg.Load()
	rows, err := w.db.QueryContext(ctx, `SELECT `+spaceColumns+` FROM wiki_spaces s
		WHERE company_id = $1 AND wiki_id = $2 AND status = 'active'
			AND (slug = $3 OR settings->'ingestion'->>'enabled' = 'true') ORDER BY slug = $3 DESC, slug`,
		companyID, defaultWikiID, defaultSpace)
	if err != nil {
		return nil, fmt.Errorf("error reading ingestion profiles: %w", err)
	}
	defer rows.Close()
	var out []ingestTarget
	for rows.Next() {
		sp, err := scanSpace(rows)
		if err != nil {
			return nil, fmt.Errorf("error reading ingestion profiles: %w", err)
		}
		var s struct {
			Ingestion *IngestionProfile `json:"ingestion"`
		}
		_ = json.Unmarshal(sp.Settings, &s)
		max := cfg.MaxIssueSourceCharacters
		switch {
		case s.Ingestion != nil && s.Ingestion.Enabled:
			if sp.Slug != defaultSpace && sp.AccessScope != "shared" {
				continue
			}
			if !s.Ingestion.takes(kind, projectID) {
				continue
			}
			if m := s.Ingestion.MaxCharactersPerSource; m > 0 && m < max {
				max = m
			}
		case sp.Slug == defaultSpace && cfg.EventIngestion:
		default:
			continue
		}
		if len(out) == ingestionProfileFanOut {
			return nil, fmt.Errorf("an event matches more than %d ingestion profiles", ingestionProfileFanOut)
		}
		out = append(out, ingestTarget{space: sp, max: max})
	}
	return out, rows.Err()
}

// anyIngestion reports whether a company's wiki takes events at all.
func (w *Wiki) anyIngestion(ctx context.Context, companyID string) bool {
	if w.cfg.Load().EventIngestion {
		return true
	}
	var on bool
	err := w.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM wiki_spaces WHERE company_id = $1 AND wiki_id = $2
		AND status = 'active' AND settings->'ingestion'->>'enabled' = 'true')`, companyID, defaultWikiID).Scan(&on)
	return err == nil && on
}
