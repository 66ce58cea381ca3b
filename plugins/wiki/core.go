package main

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/keelhq/keel/sdk"
)

// Writers of a page: agent tools may not write the protected control files.
const (
	writerAgent = "agent_tool"
	writerBoard = "board"
)

// pageWrite is one page write.
type pageWrite struct {
	Space        *Space
	Folder       *folder
	Path         string
	Contents     []byte
	ExpectedHash string
	Summary      string
	Writer       string
	Actor        *sdk.Actor
	OperationID  string
	SourceRefs   []map[string]any
}

// PageResult is the answer of a page write.
type PageResult struct {
	Status       string   `json:"status"`
	WikiID       string   `json:"wikiId"`
	SpaceSlug    string   `json:"spaceSlug"`
	Path         string   `json:"path"`
	PreviousHash *string  `json:"previousHash"`
	Title        string   `json:"title"`
	PageType     string   `json:"pageType"`
	Backlinks    []string `json:"backlinks"`
	Hash         string   `json:"hash"`
	RevisionID   string   `json:"revisionId"`
}

// writePage checks the path and the expected hash, writes the file atomically and records
// the page's metadata, links and a revision.
func (w *Wiki) writePage(ctx context.Context, p *pageWrite) (*PageResult, error) {
	if err := checkPagePath(p.Path); err != nil {
		return nil, err
	}
	if p.Writer != writerBoard {
		if err := refuseProtected(p.Path); err != nil {
			return nil, err
		}
	}
	cur, exists, err := p.Folder.read(p.Path)
	if err != nil {
		return nil, err
	}
	var prev *string
	if exists {
		h := hashOf(cur)
		prev = &h
		if p.ExpectedHash != "" && h != p.ExpectedHash {
			return nil, &sdk.Error{Status: http.StatusConflict, Code: "hash_mismatch",
				Message: fmt.Sprintf("Refusing to overwrite %s: expected hash %s but current hash is %s", p.Path, p.ExpectedHash, h)}
		}
	}
	if err := p.Folder.writeAtomic(p.Path, p.Contents); err != nil {
		return nil, err
	}
	res, err := w.indexPage(ctx, p.Space, p.Path, p.Contents, p.SourceRefs)
	if err != nil {
		return nil, err
	}
	authorKind, authorID, runID := "system", "", ""
	if a := p.Actor; a != nil {
		authorKind = a.Type
		authorID = a.UserId
		if a.Type == "agent" {
			authorID, runID = a.AgentId, a.RunId
		}
	}
	revID := uuid.NewString()
	if _, err := w.db.ExecContext(ctx, `INSERT INTO wiki_page_revisions (id, company_id, space_id, page_id, operation_id, path,
		content_hash, summary, author_kind, author_id, author_run_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		revID, p.Space.CompanyID, p.Space.ID, res.pageID, nullable(p.OperationID), p.Path, res.Hash, nullable(p.Summary),
		authorKind, nullable(authorID), nullable(runID)); err != nil {
		return nil, fmt.Errorf("error recording a revision of %s: %w", p.Path, err)
	}
	if _, err := w.db.ExecContext(ctx, `UPDATE wiki_pages SET current_revision_id = $2 WHERE id = $1`, res.pageID, revID); err != nil {
		return nil, fmt.Errorf("error recording a revision of %s: %w", p.Path, err)
	}
	if _, err := w.db.ExecContext(ctx, `UPDATE wiki_instances SET updated_at = now() WHERE company_id = $1 AND wiki_id = $2`,
		p.Space.CompanyID, p.Space.WikiID); err != nil {
		return nil, fmt.Errorf("error touching wiki %s: %w", p.Space.WikiID, err)
	}
	return &PageResult{Status: "ok", WikiID: p.Space.WikiID, SpaceSlug: p.Space.Slug, Path: p.Path, PreviousHash: prev,
		Title: res.Title, PageType: res.PageType, Backlinks: res.Links, Hash: res.Hash, RevisionID: revID}, nil
}

// indexed is a page's recorded metadata.
type indexed struct {
	pageID   string
	Title    string
	PageType string
	Links    []string
	Hash     string
}

// maxIndexedBody is how much of a page's or source's text is indexed for search
// (PostgreSQL's tsvector is limited to 1 MB).
const maxIndexedBody = 500000

// indexPage upserts a page's row from its contents: title, type, links, hash and text.
func (w *Wiki) indexPage(ctx context.Context, sp *Space, p string, contents []byte, sourceRefs []map[string]any) (*indexed, error) {
	res := &indexed{Title: pageTitle(p, contents), PageType: pageType(p), Links: pageLinks(p, contents), Hash: hashOf(contents)}
	refs := []byte(nil)
	if sourceRefs != nil {
		refs, _ = json.Marshal(sourceRefs)
	}
	err := w.db.QueryRowContext(ctx, `INSERT INTO wiki_pages (id, company_id, wiki_id, space_id, path, title, page_type, backlinks,
		content_hash, body_text, source_refs) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, coalesce($11::jsonb, '[]'))
		ON CONFLICT (space_id, path) DO UPDATE SET title = EXCLUDED.title, page_type = EXCLUDED.page_type,
			backlinks = EXCLUDED.backlinks, content_hash = EXCLUDED.content_hash, body_text = EXCLUDED.body_text,
			source_refs = CASE WHEN $11::jsonb IS NULL THEN wiki_pages.source_refs ELSE wiki_pages.source_refs || $11::jsonb END,
			updated_at = now()
		RETURNING id`, uuid.NewString(), sp.CompanyID, sp.WikiID, sp.ID, p, res.Title, res.PageType, res.Links,
		res.Hash, truncate(strings.ToValidUTF8(string(contents), ""), maxIndexedBody), nullableJSON(refs)).Scan(&res.pageID)
	if err != nil {
		return nil, fmt.Errorf("error indexing page %s: %w", p, err)
	}
	return res, nil
}

// indexBatchSize is how many pages one statement of an index refresh upserts.
const indexBatchSize = 500

// fileContents is a file read for indexing.
type fileContents struct {
	path     string
	contents []byte
}

// indexBatch upserts many pages' rows in one statement (an index refresh of a large
// folder), with the same metadata indexPage records.
func (w *Wiki) indexBatch(ctx context.Context, sp *Space, files []fileContents) error {
	if len(files) == 0 {
		return nil
	}
	ids, paths, titles, types, links, hashes, bodies := make([]string, len(files)), make([]string, len(files)), make([]string, len(files)),
		make([]string, len(files)), make([]string, len(files)), make([]string, len(files)), make([]string, len(files))
	for i, f := range files {
		l, _ := json.Marshal(pageLinks(f.path, f.contents))
		ids[i], paths[i], titles[i], types[i], links[i], hashes[i] = uuid.NewString(), f.path, pageTitle(f.path, f.contents), pageType(f.path), string(l), hashOf(f.contents)
		bodies[i] = truncate(strings.ToValidUTF8(string(f.contents), ""), maxIndexedBody)
	}
	_, err := w.db.ExecContext(ctx, `INSERT INTO wiki_pages (id, company_id, wiki_id, space_id, path, title, page_type, backlinks, content_hash, body_text)
		SELECT u.id::uuid, $1, $2, $3, u.path, u.title, u.page_type, ARRAY(SELECT jsonb_array_elements_text(u.links::jsonb)), u.hash, u.body
		FROM unnest($4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[]) AS u(id, path, title, page_type, links, hash, body)
		ON CONFLICT (space_id, path) DO UPDATE SET title = EXCLUDED.title, page_type = EXCLUDED.page_type, backlinks = EXCLUDED.backlinks,
			content_hash = EXCLUDED.content_hash, body_text = EXCLUDED.body_text, updated_at = now()`,
		sp.CompanyID, sp.WikiID, sp.ID, ids, paths, titles, types, links, hashes, bodies)
	if err != nil {
		return fmt.Errorf("error indexing %d pages: %w", len(files), err)
	}
	return nil
}

// RefreshResult says what an index refresh found.
type RefreshResult struct {
	Status    string   `json:"status"`
	SpaceSlug string   `json:"spaceSlug"`
	Indexed   []string `json:"indexed"`
	Removed   []string `json:"removed"`
	Unchanged int      `json:"unchanged"`
	// Complete is false when more changed pages wait than one call indexes
	// (maxRefreshPerCall): call again until it is true.
	Complete  bool `json:"complete"`
	Remaining int  `json:"remaining"`
}

// maxRefreshPerCall bounds the pages one index refresh indexes, so a refresh of a large
// folder answers within the request timeout; the caller repeats until complete.
const maxRefreshPerCall = 2000

// refreshIndex brings the page index in line with the folder: pages written straight to
// the folder are indexed, changed ones re-read (up to maxRefreshPerCall per call), vanished
// ones dropped (so backlinks from a renamed page's old path go with it).
func (w *Wiki) refreshIndex(ctx context.Context, sp *Space, f *folder) (*RefreshResult, error) {
	files, err := f.listMarkdown("wiki")
	if err != nil {
		return nil, err
	}
	for p := range rootControlFiles {
		if strings.HasSuffix(p, ".md") {
			if _, ok, err := f.read(p); err == nil && ok {
				files = append(files, p)
			}
		}
	}
	known := map[string]string{}
	rows, err := w.db.QueryContext(ctx, `SELECT path, content_hash FROM wiki_pages WHERE space_id = $1`, sp.ID)
	if err != nil {
		return nil, fmt.Errorf("error reading the page index: %w", err)
	}
	for rows.Next() {
		var p, h string
		if err := rows.Scan(&p, &h); err != nil {
			rows.Close()
			return nil, fmt.Errorf("error reading the page index: %w", err)
		}
		known[p] = h
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error reading the page index: %w", err)
	}
	out := &RefreshResult{Status: "ok", SpaceSlug: sp.Slug, Indexed: []string{}, Removed: []string{}}
	seen := map[string]bool{}
	var batch []fileContents
	for _, p := range files {
		if checkPagePath(p) != nil {
			continue
		}
		seen[p] = true
		b, ok, err := f.read(p)
		if err != nil || !ok {
			continue // a symlink out of the folder or a file gone meanwhile is not indexed
		}
		if known[p] == hashOf(b) {
			out.Unchanged++
			continue
		}
		if len(out.Indexed) == maxRefreshPerCall {
			out.Remaining++
			continue
		}
		batch = append(batch, fileContents{p, b})
		if len(batch) == indexBatchSize {
			if err := w.indexBatch(ctx, sp, batch); err != nil {
				return nil, err
			}
			batch = batch[:0]
		}
		out.Indexed = append(out.Indexed, p)
	}
	if err := w.indexBatch(ctx, sp, batch); err != nil {
		return nil, err
	}
	out.Complete = out.Remaining == 0
	for p := range known {
		if !seen[p] {
			out.Removed = append(out.Removed, p)
		}
	}
	if len(out.Removed) > 0 {
		if _, err := w.db.ExecContext(ctx, `DELETE FROM wiki_pages WHERE space_id = $1 AND path = ANY($2)`, sp.ID, out.Removed); err != nil {
			return nil, fmt.Errorf("error dropping vanished pages: %w", err)
		}
	}
	return out, nil
}

// SearchResult is one search hit.
type SearchResult struct {
	Kind      string  `json:"kind"`
	Path      string  `json:"path"`
	Title     string  `json:"title"`
	MatchText string  `json:"match_text"`
	Snippet   string  `json:"snippet"`
	Rank      float64 `json:"rank"`
}

// search runs a ranked full-text search over page and source text (titles weigh most,
// then paths, then bodies; English stemming), OR'ed with a prefix match of every word
// against the same vectors (so "bill" and "page-42" find "billing" and "page-4242.md"),
// both served by the GIN indexes, and returns the best hits with highlighted snippets
// (computed for those hits only).
func (w *Wiki) search(ctx context.Context, sp *Space, query, kind string, limit int) ([]SearchResult, error) {
	rows, err := w.db.QueryContext(ctx, `
		WITH q AS (SELECT websearch_to_tsquery('english', $2) AS tq,
			(SELECT to_tsquery('simple', string_agg(quote_literal(t.lexeme) || ':*', ' & '))
				FROM unnest(to_tsvector('simple', translate($2, '/-._', '    '))) AS t) AS pq),
		hits AS (
			(SELECT 'page' AS kind, p.path, p.title, p.page_type AS match_text, p.body_text,
				ts_rank_cd(p.search, q.tq) + 0.5 * ts_rank_cd(p.search, q.pq) AS rank
			FROM wiki_pages p, q WHERE p.space_id = $1 AND $3 IN ('all', 'page') AND (p.search @@ q.tq OR p.search @@ q.pq)
			ORDER BY rank DESC, p.path LIMIT $4)
			UNION ALL
			(SELECT 'source', s.raw_path, s.title, s.source_type, s.body_text,
				ts_rank_cd(s.search, q.tq) + 0.5 * ts_rank_cd(s.search, q.pq)
			FROM wiki_sources s, q WHERE s.space_id = $1 AND $3 IN ('all', 'source') AND (s.search @@ q.tq OR s.search @@ q.pq)
			ORDER BY 6 DESC, 2 LIMIT $4)
		),
		top AS (SELECT * FROM hits ORDER BY rank DESC, kind, path LIMIT $4)
		SELECT kind, path, title, match_text,
			ts_headline('english', left(body_text, 100000), q.tq, 'StartSel=**, StopSel=**, MaxWords=30, MinWords=10, MaxFragments=2, FragmentDelimiter=" … "'),
			rank
		FROM top, q ORDER BY rank DESC, kind, path`, sp.ID, query, kind, limit)
	if err != nil {
		return nil, fmt.Errorf("error searching the wiki: %w", err)
	}
	defer rows.Close()
	out := []SearchResult{}
	for rows.Next() {
		var r SearchResult
		if err := rows.Scan(&r.Kind, &r.Path, &r.Title, &r.MatchText, &r.Snippet, &r.Rank); err != nil {
			return nil, fmt.Errorf("error searching the wiki: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// PageRow is a page as lists show it.
type PageRow struct {
	Path     string `json:"path"`
	Title    string `json:"title"`
	PageType string `json:"page_type"`
	Hash     string `json:"hash"`
}

// listPages returns a page of pages in path order after the cursor, with the next cursor.
func (w *Wiki) listPages(ctx context.Context, sp *Space, cursor string, limit int) ([]PageRow, string, error) {
	after := ""
	if cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil {
			return nil, "", sdk.Invalid("cursor", "is not a cursor this tool returned")
		}
		after = string(b)
	}
	rows, err := w.db.QueryContext(ctx, `SELECT path, title, page_type, content_hash FROM wiki_pages
		WHERE space_id = $1 AND path > $2 ORDER BY path LIMIT $3`, sp.ID, after, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("error listing pages: %w", err)
	}
	defer rows.Close()
	out := []PageRow{}
	for rows.Next() {
		var r PageRow
		if err := rows.Scan(&r.Path, &r.Title, &r.PageType, &r.Hash); err != nil {
			return nil, "", fmt.Errorf("error listing pages: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("error listing pages: %w", err)
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = base64.RawURLEncoding.EncodeToString([]byte(out[limit-1].Path))
	}
	return out, next, nil
}

// backlinks returns the pages that link to p.
func (w *Wiki) backlinks(ctx context.Context, sp *Space, p string) ([]PageRow, error) {
	rows, err := w.db.QueryContext(ctx, `SELECT path, title, page_type, content_hash FROM wiki_pages
		WHERE space_id = $1 AND backlinks @> ARRAY[$2]::text[] ORDER BY path LIMIT 200`, sp.ID, p)
	if err != nil {
		return nil, fmt.Errorf("error listing backlinks of %s: %w", p, err)
	}
	defer rows.Close()
	out := []PageRow{}
	for rows.Next() {
		var r PageRow
		if err := rows.Scan(&r.Path, &r.Title, &r.PageType, &r.Hash); err != nil {
			return nil, fmt.Errorf("error listing backlinks of %s: %w", p, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// RenameResult says what a rename moved and rewrote.
type RenameResult struct {
	Status       string   `json:"status"`
	From         string   `json:"from"`
	To           string   `json:"to"`
	Hash         string   `json:"hash"`
	UpdatedPages []string `json:"updatedPages"`
}

// renamePage moves a page and rewrites the links of every page that linked to its old
// path, so backlinks stay correct.
func (w *Wiki) renamePage(ctx context.Context, sp *Space, f *folder, from, to, expectedHash string, actor *sdk.Actor, writer string) (*RenameResult, error) {
	for _, p := range []string{from, to} {
		if err := checkPagePath(p); err != nil {
			return nil, err
		}
		if writer != writerBoard {
			if err := refuseProtected(p); err != nil {
				return nil, err
			}
		}
	}
	b, ok, err := f.read(from)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, sdk.NotFound(fmt.Sprintf("Wiki page not found: %s", from))
	}
	if expectedHash != "" && hashOf(b) != expectedHash {
		return nil, &sdk.Error{Status: http.StatusConflict, Code: "hash_mismatch",
			Message: fmt.Sprintf("Refusing to overwrite %s: expected hash %s but current hash is %s", from, expectedHash, hashOf(b))}
	}
	if _, exists, err := f.read(to); err != nil {
		return nil, err
	} else if exists {
		return nil, sdk.Conflict(fmt.Sprintf("Refusing to rename %s: %s already exists", from, to))
	}
	linking, err := w.backlinks(ctx, sp, from)
	if err != nil {
		return nil, err
	}
	res, err := w.writePage(ctx, &pageWrite{Space: sp, Folder: f, Path: to, Contents: b, Summary: "Rename from " + from, Writer: writer, Actor: actor})
	if err != nil {
		return nil, err
	}
	out := &RenameResult{Status: "ok", From: from, To: to, Hash: res.Hash, UpdatedPages: []string{}}
	for _, l := range linking {
		if l.Path == from {
			continue
		}
		cur, ok, err := f.read(l.Path)
		if err != nil || !ok {
			continue
		}
		next, changed := rewriteLinks(l.Path, cur, from, to)
		if !changed {
			continue
		}
		if _, err := w.writePage(ctx, &pageWrite{Space: sp, Folder: f, Path: l.Path, Contents: next, ExpectedHash: hashOf(cur),
			Summary: "Link to " + to + " (renamed from " + from + ")", Writer: writerBoard, Actor: actor}); err != nil {
			return nil, err
		}
		out.UpdatedPages = append(out.UpdatedPages, l.Path)
	}
	r, err := f.open(false)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if err := r.Remove(f.rel(from)); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("error removing %s after the rename: %w", from, err)
	}
	if _, err := w.db.ExecContext(ctx, `DELETE FROM wiki_pages WHERE space_id = $1 AND path = $2`, sp.ID, from); err != nil {
		return nil, fmt.Errorf("error dropping %s from the index: %w", from, err)
	}
	return out, nil
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullableJSON(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}
