package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/keelhq/keel/sdk"
)

// toolScope is what every tool takes: the company, the wiki and the space.
type toolScope struct {
	CompanyID string `json:"companyId"`
	WikiID    string `json:"wikiId"`
	SpaceSlug string `json:"spaceSlug"`
}

// scope resolves a tool call's space and folder. The company must be the one keel
// checked the caller against (the run context's).
func (w *Wiki) scope(ctx context.Context, c *sdk.ToolCall, s *toolScope) (*Space, *folder, error) {
	if !strings.EqualFold(s.CompanyID, c.RunContext.CompanyID) {
		return nil, nil, sdk.Forbidden("companyId does not match the run context's company")
	}
	companyID := strings.ToLower(s.CompanyID)
	if s.WikiID == "" {
		s.WikiID = defaultWikiID
	}
	if s.SpaceSlug == "" {
		s.SpaceSlug = defaultSpace
	}
	sp, err := w.space(ctx, companyID, s.WikiID, s.SpaceSlug, false)
	if err != nil {
		return nil, nil, err
	}
	root, err := w.rootPath(ctx, companyID, s.WikiID, c.LocalFolders)
	if err != nil {
		return nil, nil, err
	}
	return sp, spaceFolder(root, sp), nil
}

// tool adapts a typed tool handler: it binds the parameters, resolves the scope and
// turns refusals (4xx) into a tool error the agent reads, not a failed call.
func tool[P any](w *Wiki, fn func(ctx context.Context, c *sdk.ToolCall, sp *Space, f *folder, p *P) (*sdk.ToolResult, error)) func(context.Context, *sdk.ToolCall) (*sdk.ToolResult, error) {
	return func(ctx context.Context, c *sdk.ToolCall) (*sdk.ToolResult, error) {
		var s toolScope
		if err := c.Bind(&s); err != nil {
			return nil, err
		}
		p := new(P)
		if err := c.Bind(p); err != nil {
			return nil, err
		}
		sp, f, err := w.scope(ctx, c, &s)
		if err == nil {
			var res *sdk.ToolResult
			if res, err = fn(ctx, c, sp, f, p); err == nil {
				return res, nil
			}
		}
		if e, ok := err.(*sdk.Error); ok && e.Status < 500 {
			msg := e.Message
			if ds, ok := e.Details.([]sdk.ValidationDetail); ok {
				for _, d := range ds {
					msg += "; " + d.Path + ": " + d.Message
				}
			}
			return &sdk.ToolResult{Error: msg, Data: map[string]any{"status": e.Status, "code": e.Code}}, nil
		}
		return nil, err
	}
}

func (w *Wiki) registerTools() {
	w.Tool("wiki_search", tool(w, w.toolSearch))
	w.Tool("wiki_list_pages", tool(w, w.toolListPages))
	w.Tool("wiki_read_page", tool(w, w.toolReadPage))
	w.Tool("wiki_write_page", tool(w, w.toolWritePage))
	w.Tool("wiki_propose_patch", tool(w, w.toolProposePatch))
	w.Tool("wiki_list_sources", tool(w, w.toolListSources))
	w.Tool("wiki_read_source", tool(w, w.toolReadSource))
	w.Tool("wiki_list_backlinks", tool(w, w.toolListBacklinks))
	w.Tool("wiki_update_index", tool(w, w.toolUpdateIndex))
	w.Tool("wiki_append_log", tool(w, w.toolAppendLog))
	w.Tool("wiki_rename_page", tool(w, w.toolRenamePage))
}

func (w *Wiki) toolSearch(ctx context.Context, _ *sdk.ToolCall, sp *Space, _ *folder, p *struct {
	Query string `json:"query"`
	Limit int    `json:"limit"`
	Kind  string `json:"kind"`
}) (*sdk.ToolResult, error) {
	if p.Limit <= 0 {
		p.Limit = 20
	}
	if p.Kind == "" {
		p.Kind = "all"
	}
	res, err := w.search(ctx, sp, p.Query, p.Kind, min(p.Limit, 50))
	if err != nil {
		return nil, err
	}
	if len(res) == 0 {
		return &sdk.ToolResult{Content: "No wiki matches found.", Data: map[string]any{"results": res}}, nil
	}
	var b strings.Builder
	for _, r := range res {
		fmt.Fprintf(&b, "%s: %s - %s\n", r.Kind, r.Path, r.Title)
		if r.Snippet != "" {
			fmt.Fprintf(&b, "    %s\n", strings.ReplaceAll(r.Snippet, "\n", " "))
		}
	}
	return &sdk.ToolResult{Content: b.String(), Data: map[string]any{"results": res}}, nil
}

func (w *Wiki) toolListPages(ctx context.Context, _ *sdk.ToolCall, sp *Space, _ *folder, p *struct {
	Cursor string `json:"cursor"`
	Limit  int    `json:"limit"`
}) (*sdk.ToolResult, error) {
	if p.Limit <= 0 {
		p.Limit = 200
	}
	pages, next, err := w.listPages(ctx, sp, p.Cursor, min(p.Limit, 500))
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	for _, r := range pages {
		fmt.Fprintf(&b, "%s - %s (%s)\n", r.Path, r.Title, r.PageType)
	}
	data := map[string]any{"pages": pages, "complete": next == "", "nextCursor": nil}
	if next != "" {
		data["nextCursor"] = next
		b.WriteString("More pages: call again with cursor " + next + "\n")
	}
	return &sdk.ToolResult{Content: b.String(), Data: data}, nil
}

func (w *Wiki) toolReadPage(_ context.Context, _ *sdk.ToolCall, sp *Space, f *folder, p *struct {
	Path string `json:"path"`
}) (*sdk.ToolResult, error) {
	if err := checkPagePath(p.Path); err != nil {
		return nil, err
	}
	b, ok, err := f.read(p.Path)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, sdk.NotFound(fmt.Sprintf("Wiki page not found: %s", p.Path))
	}
	return &sdk.ToolResult{Content: string(b), Data: map[string]any{"path": p.Path, "hash": hashOf(b), "wikiId": sp.WikiID, "spaceSlug": sp.Slug}}, nil
}

type writeParams struct {
	Path         string `json:"path"`
	Contents     string `json:"contents"`
	ExpectedHash string `json:"expectedHash"`
	Summary      string `json:"summary"`
}

func (w *Wiki) toolWritePage(ctx context.Context, c *sdk.ToolCall, sp *Space, f *folder, p *writeParams) (*sdk.ToolResult, error) {
	res, err := w.writePage(ctx, &pageWrite{Space: sp, Folder: f, Path: p.Path, Contents: []byte(p.Contents),
		ExpectedHash: p.ExpectedHash, Summary: p.Summary, Writer: writerAgent, Actor: c.Actor})
	if err != nil {
		return nil, err
	}
	return &sdk.ToolResult{Content: fmt.Sprintf("Wrote %s (%s)", res.Path, res.Hash), Data: res}, nil
}

func (w *Wiki) toolProposePatch(_ context.Context, _ *sdk.ToolCall, sp *Space, f *folder, p *writeParams) (*sdk.ToolResult, error) {
	if err := checkPagePath(p.Path); err != nil {
		return nil, err
	}
	if err := refuseProtected(p.Path); err != nil {
		return nil, err
	}
	cur, ok, err := f.read(p.Path)
	if err != nil {
		return nil, err
	}
	var curHash any
	if ok {
		curHash = hashOf(cur)
	}
	data := map[string]any{"status": "proposed", "wikiId": sp.WikiID, "spaceSlug": sp.Slug, "path": p.Path, "summary": p.Summary,
		"currentHash": curHash, "proposedHash": hashOf([]byte(p.Contents)), "proposedContents": p.Contents}
	return &sdk.ToolResult{Content: fmt.Sprintf("Proposed a change to %s (not written)", p.Path), Data: data}, nil
}

func (w *Wiki) toolListSources(ctx context.Context, _ *sdk.ToolCall, sp *Space, _ *folder, p *struct {
	Limit int `json:"limit"`
}) (*sdk.ToolResult, error) {
	if p.Limit <= 0 {
		p.Limit = 50
	}
	rows, err := w.db.QueryContext(ctx, `SELECT raw_path, title, source_type, coalesce(url, ''), content_hash FROM wiki_sources
		WHERE space_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2`, sp.ID, min(p.Limit, 200))
	if err != nil {
		return nil, fmt.Errorf("error listing sources: %w", err)
	}
	defer rows.Close()
	type row struct {
		RawPath     string `json:"raw_path"`
		Title       string `json:"title"`
		SourceType  string `json:"source_type"`
		URL         string `json:"url"`
		ContentHash string `json:"content_hash"`
	}
	out := []row{}
	var b strings.Builder
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.RawPath, &r.Title, &r.SourceType, &r.URL, &r.ContentHash); err != nil {
			return nil, fmt.Errorf("error listing sources: %w", err)
		}
		out = append(out, r)
		fmt.Fprintf(&b, "%s - %s (%s)\n", r.RawPath, r.Title, r.SourceType)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error listing sources: %w", err)
	}
	return &sdk.ToolResult{Content: b.String(), Data: map[string]any{"sources": out}}, nil
}

func (w *Wiki) toolReadSource(_ context.Context, _ *sdk.ToolCall, _ *Space, f *folder, p *struct {
	RawPath string `json:"rawPath"`
}) (*sdk.ToolResult, error) {
	if err := checkRawPath(p.RawPath); err != nil {
		return nil, err
	}
	b, ok, err := f.read(p.RawPath)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, sdk.NotFound(fmt.Sprintf("Wiki source not found: %s", p.RawPath))
	}
	return &sdk.ToolResult{Content: string(b), Data: map[string]any{"rawPath": p.RawPath, "hash": hashOf(b)}}, nil
}

func (w *Wiki) toolListBacklinks(ctx context.Context, _ *sdk.ToolCall, sp *Space, _ *folder, p *struct {
	Path string `json:"path"`
}) (*sdk.ToolResult, error) {
	if err := checkPagePath(p.Path); err != nil {
		return nil, err
	}
	rows, err := w.backlinks(ctx, sp, p.Path)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%s - %s\n", r.Path, r.Title)
	}
	if len(rows) == 0 {
		b.WriteString("No pages link to " + p.Path + ".")
	}
	return &sdk.ToolResult{Content: b.String(), Data: map[string]any{"path": p.Path, "backlinks": rows}}, nil
}

func (w *Wiki) toolUpdateIndex(ctx context.Context, c *sdk.ToolCall, sp *Space, f *folder, p *struct {
	Contents     string `json:"contents"`
	ExpectedHash string `json:"expectedHash"`
}) (*sdk.ToolResult, error) {
	res, err := w.writePage(ctx, &pageWrite{Space: sp, Folder: f, Path: "wiki/index.md", Contents: []byte(p.Contents),
		ExpectedHash: p.ExpectedHash, Summary: "Update index", Writer: writerAgent, Actor: c.Actor})
	if err != nil {
		return nil, err
	}
	return &sdk.ToolResult{Content: "Updated wiki/index.md (" + res.Hash + ")", Data: res}, nil
}

func (w *Wiki) toolAppendLog(ctx context.Context, c *sdk.ToolCall, sp *Space, f *folder, p *struct {
	Entry string `json:"entry"`
}) (*sdk.ToolResult, error) {
	res, err := w.appendLog(ctx, sp, f, p.Entry, c.Actor)
	if err != nil {
		return nil, err
	}
	return &sdk.ToolResult{Content: "Appended to wiki/log.md", Data: res}, nil
}

// appendLog appends "- <ISO time> <entry>" to wiki/log.md. Concurrent appends are
// serialized per space by a transaction-level advisory lock held across the write.
func (w *Wiki) appendLog(ctx context.Context, sp *Space, f *folder, entry string, actor *sdk.Actor) (*PageResult, error) {
	conn, err := w.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("error appending to the log: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(hashtext('llm_wiki.log:' || $1))`, sp.ID); err != nil {
		return nil, fmt.Errorf("error appending to the log: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(hashtext('llm_wiki.log:' || $1))`, sp.ID) //nolint:errcheck
	cur, ok, err := f.read("wiki/log.md")
	if err != nil {
		return nil, err
	}
	if !ok {
		cur = []byte(defaultLogText)
	}
	next := strings.TrimRight(string(cur), "\n") + "\n\n- " + w.now().Format("2006-01-02T15:04:05Z") + " " + strings.TrimSpace(entry) + "\n"
	return w.writePage(ctx, &pageWrite{Space: sp, Folder: f, Path: "wiki/log.md", Contents: []byte(next), Summary: "Append log entry",
		Writer: writerAgent, Actor: actor})
}

func (w *Wiki) toolRenamePage(ctx context.Context, c *sdk.ToolCall, sp *Space, f *folder, p *struct {
	Path         string `json:"path"`
	NewPath      string `json:"newPath"`
	ExpectedHash string `json:"expectedHash"`
}) (*sdk.ToolResult, error) {
	res, err := w.renamePage(ctx, sp, f, p.Path, p.NewPath, p.ExpectedHash, c.Actor, writerAgent)
	if err != nil {
		return nil, err
	}
	return &sdk.ToolResult{Content: fmt.Sprintf("Renamed %s to %s; links updated in %d pages", res.From, res.To, len(res.UpdatedPages)), Data: res}, nil
}
