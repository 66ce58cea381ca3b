package main

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"

	"github.com/keelhq/keel/sdk"
)

// The wiki's board UI: HTML fragments answered by the wiki's own routes, which the
// manifest's UI slots name (a company.page slot; its company.sidebar slot links to it).
// keel's board fetches them with the visitor's credentials, sanitises them and places
// them; links and htmx requests to these routes are sent back through the board.

// uiPrefix is where the fragment routes live.
const uiPrefix = "/api/plugins/" + pluginKey + "/html"

// mountUI adds the fragment routes to the wiki's handler.
func (w *Wiki) mountUI(mux *http.ServeMux) {
	mux.HandleFunc("GET "+uiPrefix+"/overview", w.uiHandler(w.uiOverview))
	mux.HandleFunc("GET "+uiPrefix+"/search", w.uiHandler(w.uiSearch))
	mux.HandleFunc("GET "+uiPrefix+"/page", w.uiHandler(w.uiPage))
}

// uiHandler answers a fragment as text/html, or the wiki's usual JSON error.
func (w *Wiki) uiHandler(fn func(r *http.Request) (template.HTML, error)) http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		out, err := fn(r)
		if err != nil {
			var e *sdk.Error
			if !errors.As(err, &e) {
				sdk.LoggerFrom(r.Context()).Error("wiki fragment failed", "error", err)
			}
			sdk.WriteErr(rw, err)
			return
		}
		rw.Header().Set("Content-Type", "text/html; charset=utf-8")
		rw.WriteHeader(http.StatusOK)
		_, _ = rw.Write([]byte(out))
	}
}

// uiQuery is the query every fragment link carries: the company and the space.
func uiQuery(companyID, space string, extra ...string) string {
	q := url.Values{"companyId": {companyID}}
	if space != "" && space != defaultSpace {
		q.Set("spaceSlug", space)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	return q.Encode()
}

// recentPage is a page as the overview lists it.
type recentPage struct {
	Path, Title, Type string
	UpdatedAt         time.Time
}

var uiTemplates = template.Must(template.New("wiki").Funcs(template.FuncMap{
	"pageURL": func(companyID, space, p string) string {
		return uiPrefix + "/page?" + uiQuery(companyID, space, "path", p)
	},
	"date": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04") },
}).Parse(`
{{define "overview"}}<div class="wiki">
<form hx-get="{{.SearchURL}}" hx-target="#wiki-results" hx-swap="innerHTML" role="search" aria-label="Search the wiki">
<label for="wiki-q">Search the wiki</label> <input id="wiki-q" name="q" type="search" required>
<button type="submit">Search</button>
</form>
<div id="wiki-results" aria-live="polite"></div>
<section aria-label="Spaces"><h2>Spaces</h2>
<ul>{{range .Spaces}}<li>{{.DisplayName}} <span class="muted">{{.Slug}}</span>{{if eq .Slug $.Space}} (shown){{end}}</li>{{end}}</ul>
</section>
<section aria-label="Recent pages"><h2>Recent pages</h2>
{{if .Recent}}<ul>{{range .Recent}}<li><a href="{{pageURL $.CompanyID $.Space .Path}}">{{.Title}}</a> <span class="muted">{{.Path}} · {{.Type}} · {{date .UpdatedAt}}</span></li>{{end}}</ul>
{{else}}<p class="muted">No pages yet: bootstrap the wiki and capture a source, or let the maintainer write some.</p>{{end}}
</section>
<p class="muted">{{.PageCount}} pages in this space.</p>
</div>{{end}}
{{define "results"}}{{if .Results}}<ul class="wiki-results">{{range .Results}}<li>
{{if eq .Kind "page"}}<a href="{{pageURL $.CompanyID $.Space .Path}}">{{.Title}}</a>{{else}}{{.Title}}{{end}}
<span class="muted">{{.Kind}} · {{.Path}}</span><br>{{.Snippet}}</li>{{end}}</ul>
{{else}}<p class="muted">Nothing in the wiki matches “{{.Query}}”.</p>{{end}}{{end}}
{{define "page"}}<article class="wiki-page" aria-label="{{.Title}}">
<p class="muted">{{.Path}}</p>
{{.Body}}
</article>{{end}}
`))

// uiOverview is the wiki's page: search, spaces and the most recently updated pages.
func (w *Wiki) uiOverview(r *http.Request) (template.HTML, error) {
	ctx := r.Context()
	q := r.URL.Query()
	sp, err := w.routeSpace(r, q.Get("wikiId"), q.Get("spaceSlug"), false)
	if err != nil {
		return "", err
	}
	rows, err := w.db.QueryContext(ctx, `SELECT `+spaceColumns+` FROM wiki_spaces s WHERE company_id = $1 AND wiki_id = $2
		AND status <> 'archived' ORDER BY slug <> 'default', display_name, slug`, sp.CompanyID, sp.WikiID)
	if err != nil {
		return "", fmt.Errorf("error listing spaces: %w", err)
	}
	var spaces []*Space
	for rows.Next() {
		s, err := scanSpace(rows)
		if err != nil {
			rows.Close()
			return "", fmt.Errorf("error listing spaces: %w", err)
		}
		spaces = append(spaces, s)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("error listing spaces: %w", err)
	}
	prow, err := w.db.QueryContext(ctx, `SELECT path, title, page_type, updated_at FROM wiki_pages
		WHERE space_id = $1 ORDER BY updated_at DESC, path LIMIT 20`, sp.ID)
	if err != nil {
		return "", fmt.Errorf("error listing recent pages: %w", err)
	}
	defer prow.Close()
	var recent []recentPage
	for prow.Next() {
		var p recentPage
		if err := prow.Scan(&p.Path, &p.Title, &p.Type, &p.UpdatedAt); err != nil {
			return "", fmt.Errorf("error listing recent pages: %w", err)
		}
		recent = append(recent, p)
	}
	if err := prow.Err(); err != nil {
		return "", fmt.Errorf("error listing recent pages: %w", err)
	}
	var count int
	if err := w.db.QueryRowContext(ctx, `SELECT count(*) FROM wiki_pages WHERE space_id = $1`, sp.ID).Scan(&count); err != nil {
		return "", fmt.Errorf("error counting pages: %w", err)
	}
	return execUI("overview", map[string]any{
		"CompanyID": sp.CompanyID, "Space": sp.Slug, "Spaces": spaces, "Recent": recent, "PageCount": count,
		"SearchURL": uiPrefix + "/search?" + uiQuery(sp.CompanyID, sp.Slug),
	})
}

// uiSearch answers the search box: the best hits as links to their pages.
func (w *Wiki) uiSearch(r *http.Request) (template.HTML, error) {
	q := r.URL.Query()
	query := strings.TrimSpace(q.Get("q"))
	if query == "" {
		return "", sdk.Invalid("q", "required")
	}
	sp, err := w.routeSpace(r, q.Get("wikiId"), q.Get("spaceSlug"), false)
	if err != nil {
		return "", err
	}
	hits, err := w.search(r.Context(), sp, query, "all", 20)
	if err != nil {
		return "", err
	}
	for i := range hits {
		// The snippets mark hits with **…**; they are shown as text.
		hits[i].Snippet = strings.ReplaceAll(hits[i].Snippet, "**", "")
	}
	return execUI("results", map[string]any{"CompanyID": sp.CompanyID, "Space": sp.Slug, "Results": hits, "Query": query})
}

// uiPage renders a page's markdown: no raw HTML (goldmark escapes it), and links to other
// wiki pages become links to their page fragments.
func (w *Wiki) uiPage(r *http.Request) (template.HTML, error) {
	q := r.URL.Query()
	p := q.Get("path")
	if err := checkPagePath(p); err != nil {
		return "", err
	}
	sp, f, err := w.routeFolder(r, q.Get("wikiId"), q.Get("spaceSlug"))
	if err != nil {
		return "", err
	}
	b, ok, err := f.read(p)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", sdk.NotFound(fmt.Sprintf("Wiki page not found: %s", p))
	}
	body, err := renderMarkdown(b, func(dest string) string {
		if strings.Contains(dest, "://") || strings.HasPrefix(dest, "#") || strings.HasPrefix(dest, "mailto:") || !strings.HasSuffix(dest, ".md") {
			return dest
		}
		target := path.Clean(path.Join(path.Dir(p), dest))
		if strings.HasPrefix(dest, "/") {
			target = strings.TrimPrefix(path.Clean(dest), "/")
		}
		return uiPrefix + "/page?" + uiQuery(sp.CompanyID, sp.Slug, "path", target)
	})
	if err != nil {
		return "", err
	}
	return execUI("page", map[string]any{"Path": p, "Title": pageTitle(p, b), "Body": body})
}

// renderMarkdown renders markdown to HTML without raw HTML (goldmark's default escapes
// it), passing every link destination through link.
func renderMarkdown(src []byte, link func(string) string) (template.HTML, error) {
	md := goldmark.New(goldmark.WithExtensions(extension.GFM),
		goldmark.WithParserOptions(parser.WithASTTransformers(util.Prioritized(linkRewriter(link), 100))))
	var buf bytes.Buffer
	if err := md.Convert(src, &buf); err != nil {
		return "", fmt.Errorf("error rendering markdown: %w", err)
	}
	return template.HTML(buf.String()), nil //nolint:gosec // goldmark without WithUnsafe escapes raw HTML
}

// linkRewriter rewrites link destinations.
type linkRewriter func(string) string

// Transform rewrites every link of the document.
func (l linkRewriter) Transform(doc *ast.Document, _ text.Reader, _ parser.Context) {
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if link, ok := n.(*ast.Link); ok && entering {
			link.Destination = []byte(l(string(link.Destination)))
		}
		return ast.WalkContinue, nil
	})
}

func execUI(name string, data any) (template.HTML, error) {
	var buf bytes.Buffer
	if err := uiTemplates.ExecuteTemplate(&buf, name, data); err != nil {
		return "", fmt.Errorf("error rendering the wiki's %s fragment: %w", name, err)
	}
	return template.HTML(buf.String()), nil //nolint:gosec // html/template escaped it
}
