package main

import (
	"embed"
	"path"
	"regexp"
	"sort"
	"strings"
)

//go:embed templates/*.md
var templates embed.FS

// bootstrapFile is one file bootstrap writes when it is missing.
type bootstrapFile struct{ path, contents string }

// bootstrapFiles are the files of a fresh wiki (or space), with today's date in the log.
func bootstrapFiles(today string) []bootstrapFile {
	tpl := func(name string) string {
		b, err := templates.ReadFile("templates/" + name)
		if err != nil {
			panic(err) // embedded at build time
		}
		return string(b)
	}
	files := []bootstrapFile{
		{".gitignore", ".DS_Store\n.obsidian/workspace*\n.obsidian/cache\n"},
		{"AGENTS.md", tpl("AGENTS.md")},
		{"IDEA.md", tpl("IDEA.md")},
		{"wiki/index.md", tpl("index.md")},
		{"wiki/log.md", tpl("log.md") + "\n## [" + today + "] setup | wiki initialized\n"},
	}
	for _, d := range []string{"raw", "wiki/sources", "wiki/projects", "wiki/entities", "wiki/concepts", "wiki/synthesis"} {
		files = append(files, bootstrapFile{d + "/.gitkeep", ""})
	}
	return files
}

var headingRE = regexp.MustCompile(`(?m)^#\s+(.+?)\s*#*\s*$`)

// pageTitle is the first "# heading" of a page, else its file name without .md.
func pageTitle(p string, contents []byte) string {
	body := string(contents)
	if strings.HasPrefix(body, "---\n") {
		if end := strings.Index(body[4:], "\n---"); end >= 0 {
			body = body[4+end+4:]
		}
	}
	if m := headingRE.FindStringSubmatch(body); m != nil {
		return truncate(strings.TrimSpace(m[1]), 500)
	}
	return strings.TrimSuffix(path.Base(p), ".md")
}

// pageType infers a page's type from where it lives.
func pageType(p string) string {
	switch {
	case p == "wiki/index.md" || p == "index.md":
		return "index"
	case p == "wiki/log.md" || p == "log.md":
		return "log"
	case rootControlFiles[p]:
		return "control"
	case strings.HasPrefix(p, "wiki/projects/") && strings.HasSuffix(p, "/standup.md"):
		return "project-standup"
	}
	if rest, ok := strings.CutPrefix(p, "wiki/"); ok {
		if dir, _, ok := strings.Cut(rest, "/"); ok {
			switch dir {
			case "sources":
				return "source"
			case "projects":
				return "project"
			case "entities":
				return "entity"
			case "concepts":
				return "concept"
			case "synthesis":
				return "synthesis"
			}
		}
	}
	return "page"
}

var (
	mdLinkRE   = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	wikiLinkRE = regexp.MustCompile(`\[\[([^\]|#]+)(?:[#|][^\]]*)?\]\]`)
	bareLinkRE = regexp.MustCompile(`(?:^|[\s(>"'` + "`" + `])(wiki/[A-Za-z0-9._/\-]+\.md)`)
)

// pageLinks returns the wiki paths a page links to, sorted and unique: Markdown links
// (relative ones resolved against the page's directory), [[wiki links]] and bare
// wiki/….md tokens. Links out of the wiki, to other sites or to itself are left out.
func pageLinks(from string, contents []byte) []string {
	set := map[string]bool{}
	add := func(target string, relative bool) {
		target = strings.TrimSpace(target)
		if i := strings.IndexAny(target, "#?"); i >= 0 {
			target = target[:i]
		}
		if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			return
		}
		if strings.HasPrefix(target, "/") {
			target = strings.TrimPrefix(target, "/")
		} else if relative && !strings.HasPrefix(target, "wiki/") && !rootControlFiles[target] {
			target = path.Join(path.Dir(from), target)
		}
		target = path.Clean(target)
		if !strings.HasSuffix(target, ".md") && !strings.Contains(path.Base(target), ".") {
			target += ".md"
		}
		if target == from || checkPagePath(target) != nil {
			return
		}
		set[target] = true
	}
	s := string(contents)
	for _, m := range mdLinkRE.FindAllStringSubmatch(s, -1) {
		add(m[1], true)
	}
	for _, m := range wikiLinkRE.FindAllStringSubmatch(s, -1) {
		t := strings.TrimSpace(m[1])
		if !strings.HasPrefix(t, "wiki/") && !rootControlFiles[t] && !rootControlFiles[t+".md"] {
			t = "wiki/" + t
		}
		add(t, false)
	}
	for _, m := range bareLinkRE.FindAllStringSubmatch(s, -1) {
		add(m[1], false)
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// rewriteLinks replaces links to from with links to to in a page's contents (Markdown
// link targets, [[wiki links]] and bare tokens), relative links included. It reports
// whether anything changed.
func rewriteLinks(page string, contents []byte, from, to string) ([]byte, bool) {
	s := string(contents)
	changed := false
	s = mdLinkRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := mdLinkRE.FindStringSubmatch(m)
		target := sub[1]
		frag := ""
		if i := strings.IndexAny(target, "#?"); i >= 0 {
			target, frag = target[:i], target[i:]
		}
		resolved := target
		switch {
		case strings.HasPrefix(target, "/"):
			resolved = strings.TrimPrefix(target, "/")
		case !strings.HasPrefix(target, "wiki/") && !rootControlFiles[target]:
			resolved = path.Clean(path.Join(path.Dir(page), target))
		}
		if resolved != from {
			return m
		}
		changed = true
		return strings.Replace(m, sub[1], to+frag, 1)
	})
	s = wikiLinkRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := wikiLinkRE.FindStringSubmatch(m)
		t := strings.TrimSpace(sub[1])
		if t == from || "wiki/"+t == from || "wiki/"+t+".md" == from || t+".md" == from {
			changed = true
			return strings.Replace(m, sub[1], to, 1)
		}
		return m
	})
	s = bareLinkRE.ReplaceAllStringFunc(s, func(m string) string {
		if strings.HasSuffix(m, from) && !strings.HasSuffix(m, "/"+from) {
			changed = true
			return strings.TrimSuffix(m, from) + to
		}
		return m
	})
	return []byte(s), changed
}

// slugify lowercases s, turns each run of other characters than [a-z0-9] into "-", trims
// the dashes and keeps at most 64 characters.
func slugify(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	out := strings.Trim(b.String(), "-")
	if len(out) > 64 {
		out = strings.Trim(out[:64], "-")
	}
	return out
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && (s[n]&0xC0) == 0x80 {
		n--
	}
	return s[:n]
}
