package portability_test

import (
	"archive/zip"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/extensions/portability"
	"github.com/keelhq/keel/sdktest"
)

// seeded names what seed created.
type seeded struct {
	companyID string
	issues    int
}

// seed fills a company with agents (one reporting to the other, timer heartbeat on), a
// project, labels, n issues with comments, parents, blockers, documents, work products and
// attachments, a routine with a schedule trigger and a managed skill.
func seed(t *testing.T, h *sdktest.Host, name string, n int) *seeded {
	t.Helper()
	c := h.CreateCompany(name)
	base := "/api/companies/" + c
	ok(t, h.Do("PATCH", base, map[string]any{"budgetMonthlyCents": 12345}), http.StatusOK)
	ceo := ok(t, h.Do("POST", base+"/agents", map[string]any{"name": "Chief", "role": "ceo", "title": "Chief Executive",
		"capabilities": "Runs the company.", "budgetMonthlyCents": 5000}), http.StatusCreated)
	eng := ok(t, h.Do("POST", base+"/agents", map[string]any{"name": "Builder", "role": "engineer", "reportsTo": ceo["id"],
		"runtimeConfig": map[string]any{"heartbeat": map[string]any{"enabled": true, "intervalSec": 3600}},
		"adapterConfig": map[string]any{"command": "true"}}), http.StatusCreated)
	proj := ok(t, h.Do("POST", base+"/projects", map[string]any{"name": "Apollo", "description": "To the moon.", "status": "in_progress",
		"color": "#112233", "leadAgentId": eng["id"]}), http.StatusCreated)
	ok(t, h.Do("POST", base+"/projects", map[string]any{"name": "Gemini", "status": "planned"}), http.StatusCreated)
	bug := ok(t, h.Do("POST", base+"/labels", map[string]any{"name": "bug", "color": "#ff0000"}), http.StatusCreated)
	ux := ok(t, h.Do("POST", base+"/labels", map[string]any{"name": "ux", "color": "#00ff00"}), http.StatusCreated)
	statuses := []string{"backlog", "todo", "in_review", "done", "cancelled"}
	priorities := []string{"critical", "high", "medium", "low"}
	ids := make([]string, n)
	for i := range n {
		body := map[string]any{"title": fmt.Sprintf("Issue %03d", i), "description": fmt.Sprintf("Do thing %d.\n\n- step one\n- step two", i),
			"priority": priorities[i%len(priorities)], "status": statuses[i%len(statuses)]}
		if i%2 == 0 {
			body["projectId"] = proj["id"]
		}
		switch i % 3 {
		case 1:
			body["labelIds"] = []any{bug["id"]}
		case 2:
			body["labelIds"] = []any{bug["id"], ux["id"]}
		}
		if i%10 == 5 {
			body["parentId"] = ids[i-1]
		}
		if i%25 == 7 {
			body["assigneeAgentId"] = eng["id"]
			body["status"] = "done"
		}
		iss := ok(t, h.Do("POST", base+"/issues", body), http.StatusCreated)
		ids[i] = iss["id"].(string)
		for j := range 2 {
			ok(t, h.Do("POST", "/api/issues/"+ids[i]+"/comments", map[string]any{"body": fmt.Sprintf("Comment %d on %d", j, i)}), http.StatusCreated)
		}
		if i%20 == 3 {
			ok(t, h.Do("PUT", "/api/issues/"+ids[i]+"/documents/plan", map[string]any{"title": "Plan", "format": "markdown",
				"body": fmt.Sprintf("# Plan %d\n", i)}), http.StatusCreated)
		}
		if i%40 == 4 {
			ok(t, h.Do("POST", "/api/issues/"+ids[i]+"/work-products", map[string]any{"type": "pull_request", "provider": "forge",
				"title": fmt.Sprintf("PR %d", i), "url": fmt.Sprintf("https://forge.example/pr/%d", i)}), http.StatusCreated)
		}
		if i%25 == 9 {
			upload(t, h, c, ids[i], fmt.Sprintf("report-%d.bin", i), "application/octet-stream", []byte(fmt.Sprintf("\x00\x01binary %d", i)))
			upload(t, h, c, ids[i], "shared.txt", "text/plain", []byte("same bytes everywhere"))
		}
	}
	// Blockers: issue 11 is blocked by 10 and 12 (not done).
	if n > 12 {
		ok(t, h.Do("PATCH", "/api/issues/"+ids[11], map[string]any{"blockedByIssueIds": []string{ids[10], ids[12]}, "status": "blocked"}), http.StatusOK)
	}
	rt := ok(t, h.Do("POST", base+"/routines", map[string]any{"title": "Weekly report", "description": "Write the weekly report.",
		"assigneeAgentId": eng["id"], "priority": "high", "projectId": proj["id"]}), http.StatusCreated)
	ok(t, h.Do("POST", "/api/routines/"+rt["id"].(string)+"/triggers", map[string]any{"kind": "schedule", "cronExpression": "0 9 * * 1",
		"timezone": "Europe/Paris", "label": "Mondays"}), http.StatusCreated)
	ok(t, h.Do("POST", base+"/skills", map[string]any{"name": "Release Notes", "description": "Write release notes",
		"markdown": "# Release notes\n\nCollect merged changes.\n"}), http.StatusCreated)
	return &seeded{companyID: c, issues: n}
}

// snapshot reads a company through the API into a comparable value: names instead of ids.
func snapshot(t *testing.T, h *sdktest.Host, c string) map[string]any {
	t.Helper()
	out := map[string]any{}
	company := ok(t, h.Do("GET", "/api/companies/"+c, nil), http.StatusOK)
	out["budget"] = company["budgetMonthlyCents"]
	agentNames := map[string]string{}
	var agents []map[string]any
	for _, a := range list(t, h.Do("GET", "/api/companies/"+c+"/agents", nil)) {
		agentNames[a["id"].(string)] = a["name"].(string)
	}
	for _, a := range list(t, h.Do("GET", "/api/companies/"+c+"/agents", nil)) {
		rc, _ := a["runtimeConfig"].(map[string]any)
		if hb, _ := rc["heartbeat"].(map[string]any); hb != nil {
			delete(hb, "enabled")
		}
		boss := ""
		if r, _ := a["reportsTo"].(string); r != "" {
			boss = agentNames[r]
		}
		agents = append(agents, map[string]any{"name": a["name"], "role": a["role"], "title": a["title"], "capabilities": a["capabilities"],
			"adapterType": a["adapterType"], "adapterConfig": a["adapterConfig"], "runtimeConfig": rc, "budget": a["budgetMonthlyCents"],
			"reportsTo": boss, "permissions": a["permissions"]})
	}
	sort.Slice(agents, func(i, j int) bool { return agents[i]["name"].(string) < agents[j]["name"].(string) })
	out["agents"] = agents
	projectNames := map[string]string{}
	var projects []map[string]any
	for _, p := range list(t, h.Do("GET", "/api/companies/"+c+"/projects", nil)) {
		projectNames[p["id"].(string)] = p["name"].(string)
		lead := ""
		if l, _ := p["leadAgentId"].(string); l != "" {
			lead = agentNames[l]
		}
		projects = append(projects, map[string]any{"name": p["name"], "description": p["description"], "status": p["status"],
			"color": p["color"], "lead": lead})
	}
	sort.Slice(projects, func(i, j int) bool { return projects[i]["name"].(string) < projects[j]["name"].(string) })
	out["projects"] = projects
	var all []map[string]any
	for offset := 0; ; offset += 200 {
		page := list(t, h.Do("GET", fmt.Sprintf("/api/companies/%s/issues?limit=200&offset=%d&sortField=createdAt&sortDir=asc", c, offset), nil))
		all = append(all, page...)
		if len(page) < 200 {
			break
		}
	}
	titles := map[string]string{}
	for _, is := range all {
		titles[is["id"].(string)] = is["title"].(string)
	}
	var issues []map[string]any
	for _, is := range all {
		id := is["id"].(string)
		d := ok(t, h.Do("GET", "/api/issues/"+id, nil), http.StatusOK)
		var labels, blockers []string
		for _, l := range d["labels"].([]any) {
			labels = append(labels, l.(map[string]any)["name"].(string)+l.(map[string]any)["color"].(string))
		}
		sort.Strings(labels)
		if bb, _ := d["blockedBy"].([]any); bb != nil {
			for _, b := range bb {
				blockers = append(blockers, titles[b.(map[string]any)["id"].(string)])
			}
		}
		sort.Strings(blockers)
		ref := func(field string, names map[string]string) string {
			if v, _ := d[field].(string); v != "" {
				return names[v]
			}
			return ""
		}
		var comments []any
		for _, cm := range list(t, h.Do("GET", "/api/issues/"+id+"/comments?order=asc", nil)) {
			comments = append(comments, cm["body"])
		}
		var docs []any
		for _, s := range list(t, h.Do("GET", "/api/issues/"+id+"/documents", nil)) {
			doc := ok(t, h.Do("GET", "/api/issues/"+id+"/documents/"+s["key"].(string), nil), http.StatusOK)
			docs = append(docs, []any{doc["key"], doc["title"], doc["format"], doc["body"]})
		}
		var atts []string
		for _, a := range list(t, h.Do("GET", "/api/issues/"+id+"/attachments", nil)) {
			atts = append(atts, fmt.Sprintf("%s|%s|%s|%v", a["fileName"], a["contentType"], a["sha256"], a["sizeBytes"]))
		}
		sort.Strings(atts)
		var wps []any
		for _, wp := range list(t, h.Do("GET", "/api/issues/"+id+"/work-products", nil)) {
			wps = append(wps, []any{wp["type"], wp["provider"], wp["title"], wp["url"], wp["status"]})
		}
		issues = append(issues, map[string]any{"title": d["title"], "description": d["description"], "status": d["status"],
			"priority": d["priority"], "workMode": d["workMode"], "project": ref("projectId", projectNames),
			"assignee": ref("assigneeAgentId", agentNames), "parent": ref("parentId", titles), "labels": labels, "blockedBy": blockers,
			"comments": comments, "documents": docs, "attachments": atts, "workProducts": wps})
	}
	sort.Slice(issues, func(i, j int) bool { return issues[i]["title"].(string) < issues[j]["title"].(string) })
	out["issues"] = issues
	var routines []map[string]any
	for _, r := range list(t, h.Do("GET", "/api/companies/"+c+"/routines", nil)) {
		d := ok(t, h.Do("GET", "/api/routines/"+r["id"].(string), nil), http.StatusOK)
		var triggers []any
		for _, tr := range d["triggers"].([]any) {
			m := tr.(map[string]any)
			triggers = append(triggers, []any{m["kind"], m["label"], m["enabled"], m["cronExpression"], m["timezone"]})
		}
		routines = append(routines, map[string]any{"title": d["title"], "description": d["description"], "status": d["status"],
			"priority": d["priority"], "assignee": agentNames[fmt.Sprint(d["assigneeAgentId"])], "project": projectNames[fmt.Sprint(d["projectId"])],
			"concurrencyPolicy": d["concurrencyPolicy"], "catchUpPolicy": d["catchUpPolicy"], "triggers": triggers})
	}
	out["routines"] = routines
	var skills []map[string]any
	for _, s := range list(t, h.Do("GET", "/api/companies/"+c+"/skills", nil)) {
		if s["sourceType"] == "service_bundled" {
			continue
		}
		d := ok(t, h.Do("GET", "/api/companies/"+c+"/skills/"+s["id"].(string), nil), http.StatusOK)
		skills = append(skills, map[string]any{"slug": d["slug"], "name": d["name"], "description": d["description"],
			"sourceType": d["sourceType"], "markdown": d["markdown"], "trustLevel": d["trustLevel"]})
	}
	out["skills"] = skills
	return out
}

// heartbeatsOff requires every agent of a company to have its timer heartbeat off.
func heartbeatsOff(t *testing.T, h *sdktest.Host, c string) {
	t.Helper()
	for _, a := range list(t, h.Do("GET", "/api/companies/"+c+"/agents", nil)) {
		rc := a["runtimeConfig"].(map[string]any)
		require.Equal(t, false, rc["heartbeat"].(map[string]any)["enabled"], "agent %s", a["name"])
	}
}

var allGroups = []string{"company", "agents", "projects", "tasks", "skills"}

func TestPortability(t *testing.T) {
	// The forge serves a package folder of a repository from a temp dir.
	forgeDir := t.TempDir()
	forge := http.NewServeMux()
	forge.HandleFunc("GET /api/repos/acme/company", func(rw http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(rw).Encode(map[string]any{"default_branch": "main"})
	})
	forge.HandleFunc("GET /api/repos/acme/company/commits/main", func(rw http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(rw).Encode(map[string]any{"sha": "c0ffee"})
	})
	forge.HandleFunc("GET /api/repos/acme/company/git/trees/c0ffee", func(rw http.ResponseWriter, _ *http.Request) {
		var tree []map[string]any
		_ = filepath.WalkDir(forgeDir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				rel, _ := filepath.Rel(forgeDir, p)
				tree = append(tree, map[string]any{"path": "pkg/" + filepath.ToSlash(rel), "type": "blob"})
			}
			return nil
		})
		tree = append(tree, map[string]any{"path": "README.md", "type": "blob"})
		_ = json.NewEncoder(rw).Encode(map[string]any{"sha": "c0ffee", "tree": tree})
	})
	forge.HandleFunc("GET /raw/acme/company/c0ffee/pkg/{path...}", func(rw http.ResponseWriter, r *http.Request) {
		http.ServeFile(rw, r, filepath.Join(forgeDir, filepath.FromSlash(r.PathValue("path"))))
	})
	forgeSrv := httptest.NewServer(forge)
	t.Cleanup(forgeSrv.Close)
	t.Setenv(portability.EnvForgeAPI, forgeSrv.URL+"/api")
	t.Setenv(portability.EnvForgeRaw, forgeSrv.URL+"/raw")
	t.Setenv(portability.EnvForgeWeb, forgeSrv.URL)
	h := sdktest.Start(t, sdktest.Options{Builtins: true})

	exportTo := func(t *testing.T, c string, include []string) string {
		t.Helper()
		dir := filepath.Join(t.TempDir(), "pkg")
		res := ok(t, h.Do("POST", "/api/companies/"+c+"/exports", map[string]any{"include": include, "outputPath": dir}), http.StatusOK)
		require.Equal(t, dir, res["outputPath"])
		return dir
	}
	apply := func(t *testing.T, c string, body map[string]any) map[string]any {
		t.Helper()
		return ok(t, h.Do("POST", "/api/companies/"+c+"/imports/apply", body), http.StatusOK)
	}

	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		src := seed(t, h, "Round Trip Co", 200)
		dir := exportTo(t, src.companyID, allGroups)
		m := map[string]any{}
		b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &m))
		require.Equal(t, []any{"company", "agents", "projects", "skills", "issues"}, m["include"])
		counts := m["counts"].(map[string]any)
		require.EqualValues(t, 200, counts["issues"])
		require.EqualValues(t, 2, counts["agents"])
		require.EqualValues(t, 1, counts["routines"])
		// Attachments are content-addressed: the shared file is stored once.
		require.EqualValues(t, 9, counts["attachments"])
		require.FileExists(t, filepath.Join(dir, "COMPANY.md"))
		require.FileExists(t, filepath.Join(dir, "agents", "builder", "AGENT.md"))
		issueMD, err := os.ReadFile(filepath.Join(dir, "issues", "ROU-12", "ISSUE.md"))
		require.NoError(t, err)
		require.Contains(t, string(issueMD), "blockedBy:")

		dst := h.CreateCompany("Round Trip Copy")
		pre := ok(t, h.Do("POST", "/api/companies/"+dst+"/imports/preview", map[string]any{"source": dir}), http.StatusOK)
		plan := pre["plan"].(map[string]any)
		require.EqualValues(t, 200, plan["issues"].(map[string]any)["create"])
		require.Equal(t, "create", plan["agents"].([]any)[0].(map[string]any)["action"])
		require.Equal(t, "rename", pre["collisionStrategy"])
		require.Empty(t, list(t, h.Do("GET", "/api/companies/"+dst+"/agents", nil)), "a preview writes nothing")

		res := apply(t, dst, map[string]any{"source": dir})
		progress := res["progress"].(map[string]any)
		require.EqualValues(t, 200, progress["issues"])
		require.EqualValues(t, 2, progress["agents"])
		require.EqualValues(t, 1, progress["routines"])
		heartbeatsOff(t, h, dst)
		want, got := snapshot(t, h, src.companyID), snapshot(t, h, dst)
		for _, k := range []string{"budget", "agents", "projects", "routines", "skills"} {
			require.Equal(t, want[k], got[k], k)
		}
		wantIssues, gotIssues := want["issues"].([]map[string]any), got["issues"].([]map[string]any)
		require.Len(t, gotIssues, 200)
		for i := range wantIssues {
			require.Equal(t, wantIssues[i], gotIssues[i], "issue %s", wantIssues[i]["title"])
		}
	})

	t.Run("TamperedAttachment", func(t *testing.T) {
		t.Parallel()
		src := seed(t, h, "Tamper Co", 12)
		dir := exportTo(t, src.companyID, allGroups)
		assets, err := filepath.Glob(filepath.Join(dir, "assets", "sha256", "*"))
		require.NoError(t, err)
		require.NotEmpty(t, assets)
		victim := assets[len(assets)-1]
		require.NoError(t, os.WriteFile(victim, []byte("tampered"), 0o644))
		rel := "assets/sha256/" + filepath.Base(victim)
		dst := h.CreateCompany("Tamper Target")
		for _, route := range []string{"preview", "apply"} {
			e := wantErr(t, h.Do("POST", "/api/companies/"+dst+"/imports/"+route, map[string]any{"source": dir}), http.StatusConflict, "")
			require.Contains(t, e["error"], rel, "the message names the file")
		}
		require.Empty(t, list(t, h.Do("GET", "/api/companies/"+dst+"/agents", nil)), "nothing written")
		require.Empty(t, list(t, h.Do("GET", "/api/companies/"+dst+"/projects", nil)), "nothing written")
		require.Empty(t, list(t, h.Do("GET", "/api/companies/"+dst+"/issues", nil)), "nothing written")
		require.Empty(t, list(t, h.Do("GET", "/api/companies/"+dst+"/routines", nil)), "nothing written")
		require.EqualValues(t, 0, ok(t, h.Do("GET", "/api/companies/"+dst, nil), http.StatusOK)["budgetMonthlyCents"])
	})

	t.Run("CollisionModes", func(t *testing.T) {
		t.Parallel()
		src := seed(t, h, "Collide Co", 3)
		dir := exportTo(t, src.companyID, []string{"agents", "projects", "skills"})
		dst := h.CreateCompany("Collide Target")
		apply(t, dst, map[string]any{"source": dir})
		names := func() []string {
			var out []string
			for _, a := range list(t, h.Do("GET", "/api/companies/"+dst+"/agents", nil)) {
				out = append(out, a["name"].(string))
			}
			sort.Strings(out)
			return out
		}
		require.Equal(t, []string{"Builder", "Chief"}, names())

		// rename (the default) creates the colliding entities under new names.
		res := apply(t, dst, map[string]any{"source": dir})
		agents := res["plan"].(map[string]any)["agents"].([]any)
		require.Equal(t, "rename", agents[0].(map[string]any)["action"])
		require.Equal(t, []string{"Builder", "Builder 2", "Chief", "Chief 2"}, names())
		var skillSlugs []string
		for _, s := range list(t, h.Do("GET", "/api/companies/"+dst+"/skills", nil)) {
			if s["sourceType"] != "service_bundled" {
				skillSlugs = append(skillSlugs, s["slug"].(string))
			}
		}
		sort.Strings(skillSlugs)
		require.Equal(t, []string{"release-notes", "release-notes-2"}, skillSlugs)

		// skip leaves them alone.
		pre := ok(t, h.Do("POST", "/api/companies/"+dst+"/imports/preview", map[string]any{"source": dir, "collisionStrategy": "skip"}), http.StatusOK)
		require.Equal(t, "skip", pre["plan"].(map[string]any)["agents"].([]any)[0].(map[string]any)["action"])
		apply(t, dst, map[string]any{"source": dir, "collisionStrategy": "skip"})
		require.Equal(t, []string{"Builder", "Builder 2", "Chief", "Chief 2"}, names())
		require.Len(t, list(t, h.Do("GET", "/api/companies/"+dst+"/projects", nil)), 4)

		// replace writes the package's fields over the existing ones.
		builder := ""
		for _, a := range list(t, h.Do("GET", "/api/companies/"+dst+"/agents", nil)) {
			if a["name"] == "Builder" {
				builder = a["id"].(string)
			}
		}
		ok(t, h.Do("PATCH", "/api/agents/"+builder, map[string]any{"title": "Changed", "capabilities": "Changed too"}), http.StatusOK)
		res = apply(t, dst, map[string]any{"source": dir, "collisionStrategy": "replace"})
		require.Equal(t, "replace", res["plan"].(map[string]any)["agents"].([]any)[0].(map[string]any)["action"])
		require.Equal(t, []string{"Builder", "Builder 2", "Chief", "Chief 2"}, names())
		a := ok(t, h.Do("GET", "/api/agents/"+builder, nil), http.StatusOK)
		require.Nil(t, a["title"])
		require.Nil(t, a["capabilities"])
		heartbeatsOff(t, h, dst)
	})

	t.Run("ZipInlineAndForge", func(t *testing.T) {
		t.Parallel()
		src := seed(t, h, "Zip Co", 10)
		// Default export set: company and agents.
		pre := ok(t, h.Do("POST", "/api/companies/"+src.companyID+"/exports/preview", map[string]any{}), http.StatusOK)
		require.Equal(t, []any{"company", "agents"}, pre["include"])
		require.Contains(t, pre["files"], "COMPANY.md")
		require.Contains(t, pre["files"], "agents/chief/AGENT.md")

		z := ok(t, h.Do("POST", "/api/companies/"+src.companyID+"/exports", map[string]any{"include": allGroups, "format": "zip"}), http.StatusOK)
		dst := h.CreateCompany("Zip Target")
		res := apply(t, dst, map[string]any{"source": map[string]any{"type": "zip", "data": z["zip"]}})
		require.EqualValues(t, 10, res["progress"].(map[string]any)["issues"])

		inline := ok(t, h.Do("POST", "/api/companies/"+src.companyID+"/exports", map[string]any{"include": []string{"agents", "projects", "issues"}}), http.StatusOK)
		require.Contains(t, inline["files"], "manifest.json")
		dst2 := h.CreateCompany("Inline Target")
		res = apply(t, dst2, map[string]any{"source": map[string]any{"type": "inline", "files": inline["files"]}})
		require.EqualValues(t, 10, res["progress"].(map[string]any)["issues"])
		require.Equal(t, snapshot(t, h, dst)["issues"], snapshot(t, h, dst2)["issues"])

		// The forge serves the package folder pkg/ of acme/company.
		zr, err := zip.NewReader(bytes.NewReader(mustB64(t, z["zip"].(string))), int64(len(mustB64(t, z["zip"].(string)))))
		require.NoError(t, err)
		for _, f := range zr.File {
			rc, err := f.Open()
			require.NoError(t, err)
			var buf bytes.Buffer
			_, err = buf.ReadFrom(rc)
			require.NoError(t, err)
			rc.Close()
			_, rel, _ := strings.Cut(f.Name, "/")
			require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(forgeDir, rel)), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(forgeDir, rel), buf.Bytes(), 0o644))
		}
		dst3 := h.CreateCompany("Forge Target")
		pre = ok(t, h.Do("POST", "/api/companies/"+dst3+"/imports/preview", map[string]any{"source": "acme/company/pkg"}), http.StatusOK)
		require.Equal(t, "c0ffee", pre["source"].(map[string]any)["commit"])
		res = apply(t, dst3, map[string]any{"source": forgeSrv.URL + "/acme/company/tree/main/pkg", "include": []string{"tasks"}})
		require.EqualValues(t, 10, res["progress"].(map[string]any)["issues"])
		require.Equal(t, []any{"issues"}, res["include"])
	})

	t.Run("BadInput", func(t *testing.T) {
		t.Parallel()
		c := h.CreateCompany("Bad Input Co")
		exp := "/api/companies/" + c + "/exports"
		imp := "/api/companies/" + c + "/imports/apply"
		wantErr(t, h.Do("POST", exp, map[string]any{"include": []string{"agents", "wombats"}}), http.StatusBadRequest, "Validation error")
		wantErr(t, h.Do("POST", exp+"/preview", map[string]any{"format": "tar"}), http.StatusBadRequest, "Validation error")
		wantErr(t, h.Do("POST", exp, map[string]any{"outputPath": "relative/dir"}), http.StatusBadRequest, "Validation error")
		dir := exportTo(t, c, nil)
		wantErr(t, h.Do("POST", imp, map[string]any{"source": dir, "collisionStrategy": "merge"}), http.StatusBadRequest, "Validation error")
		wantErr(t, h.Do("POST", imp, map[string]any{"source": dir, "include": []string{"bogus"}}), http.StatusBadRequest, "Validation error")
		wantErr(t, h.Do("POST", imp, map[string]any{}), http.StatusBadRequest, "Validation error")
		wantErr(t, h.Do("POST", imp, map[string]any{"source": filepath.Join(dir, "COMPANY.md")}), http.StatusUnprocessableEntity,
			"Import path is not a directory or a zip file: "+filepath.Join(dir, "COMPANY.md"))
		wantErr(t, h.Do("POST", imp, map[string]any{"source": "/no/such/dir"}), http.StatusUnprocessableEntity, "")
		wantErr(t, h.Do("POST", imp, map[string]any{"source": "https://example.com/pkg.zip"}), http.StatusUnprocessableEntity,
			"Only code-forge URLs or owner/repo shorthands are accepted as remote import sources")
		wantErr(t, h.Do("POST", imp, map[string]any{"source": t.TempDir()}), http.StatusUnprocessableEntity, "Package has no manifest.json")
		// Zip-slip entries are refused.
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		w, err := zw.Create("../../etc/evil")
		require.NoError(t, err)
		_, _ = w.Write([]byte("x"))
		require.NoError(t, zw.Close())
		e := wantErr(t, h.Do("POST", imp, map[string]any{"source": map[string]any{"type": "zip", "data": base64.StdEncoding.EncodeToString(buf.Bytes())}}),
			http.StatusBadRequest, "")
		require.Contains(t, fmt.Sprint(e), "escapes the package")
		e = wantErr(t, h.Do("POST", imp, map[string]any{"source": map[string]any{"type": "inline", "files": map[string]any{"../x": "y"}}}),
			http.StatusBadRequest, "")
		require.Contains(t, fmt.Sprint(e), "escapes the package")
		wantErr(t, h.Do("POST", imp, map[string]any{"source": map[string]any{"type": "zip", "data": "not base64!"}}), http.StatusBadRequest, "")
		// An agent without agents:create cannot import.
		worker := h.CreateAgent(c, "Worker", "engineer")
		wantErr(t, h.Do("POST", imp, map[string]any{"source": dir}, worker.As("")...), http.StatusForbidden, "")
		wantErr(t, h.Do("POST", exp, map[string]any{}, worker.As("")...), http.StatusForbidden, "")
	})
}

func mustB64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	require.NoError(t, err)
	return b
}
