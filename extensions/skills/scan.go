package skills

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/keelhq/keel/sdk"
)

// scanRoots are where a workspace keeps skills, relative to its folder.
var scanRoots = []string{"skills", ".agents/skills", ".claude/skills", ".service/skills"}

// workspaceRecord is the part of a project workspace a scan reads.
type workspaceRecord struct {
	ID  string  `json:"id"`
	Cwd *string `json:"cwd"`
}

// projectRecord is the part of a project a scan reads.
type projectRecord struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	Workspaces []workspaceRecord `json:"workspaces"`
}

func (x *Skills) handleScan(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	companyID := sdk.CompanyIDFrom(ctx)
	if err := x.requireMutate(ctx, companyID); err != nil {
		x.writeErr(rw, err)
		return
	}
	var body ScanBody
	if err := sdk.DecodeJSON(r, &body); err != nil {
		x.writeErr(rw, err)
		return
	}
	var d []sdk.ValidationDetail
	for _, list := range []struct {
		name string
		ids  []string
	}{{"projectIds", body.ProjectIDs}, {"workspaceIds", body.WorkspaceIDs}} {
		if len(list.ids) > 500 {
			d = append(d, sdk.ValidationDetail{Path: list.name, Message: "must hold at most 500 ids"})
		}
		for _, id := range list.ids {
			if !sdk.IsUUID(strings.ToLower(id)) {
				d = append(d, sdk.ValidationDetail{Path: list.name, Message: "must be UUIDs"})
				break
			}
		}
	}
	if len(d) > 0 {
		x.writeErr(rw, sdk.ValidationError(d...))
		return
	}
	res := &ScanResult{Imported: []*Skill{}, Updated: []*Skill{}, Skipped: []any{}, Conflicts: []any{}, Warnings: []string{}}
	var projects []projectRecord
	if len(body.ProjectIDs) == 0 {
		if err := x.host.Call(ctx, "work.projects.list", sdk.SystemActor(), companyID, map[string]any{}, &projects); err != nil {
			x.writeErr(rw, err)
			return
		}
	} else {
		for _, id := range body.ProjectIDs {
			var p projectRecord
			err := x.host.Call(ctx, "work.projects.get", sdk.SystemActor(), companyID, map[string]any{"projectId": strings.ToLower(id)}, &p)
			if isNotFound(err) {
				res.Warnings = append(res.Warnings, "project "+id+" not found in this company, skipped")
				continue
			}
			if err != nil {
				x.writeErr(rw, err)
				return
			}
			projects = append(projects, p)
		}
	}
	wantWS := map[string]bool{}
	for _, id := range body.WorkspaceIDs {
		wantWS[strings.ToLower(id)] = true
	}
	for _, p := range projects {
		for _, ws := range p.Workspaces {
			if len(wantWS) > 0 && !wantWS[ws.ID] {
				continue
			}
			if ws.Cwd == nil || !filepath.IsAbs(*ws.Cwd) {
				continue
			}
			var cands []candidate
			for _, rel := range scanRoots {
				root := filepath.Join(*ws.Cwd, rel)
				if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
					continue
				}
				for _, dir := range findSkillDirs(root, 3) {
					files, w, err := readSkillDir(dir)
					res.Warnings = append(res.Warnings, w...)
					if err != nil {
						res.Warnings = append(res.Warnings, dir+": "+err.Error()+", skipped")
						continue
					}
					rel, _ := filepath.Rel(*ws.Cwd, dir)
					cands = append(cands, candidate{Dir: filepath.ToSlash(rel), Files: files, Locator: dir})
				}
			}
			if len(cands) == 0 {
				continue
			}
			src := &Source{Type: SourceProjectScan, Locator: *ws.Cwd, Path: *ws.Cwd}
			out, err := x.importCandidates(ctx, companyID, src, cands, importOptions{ProjectID: p.ID, ProjectName: p.Name, Scan: true})
			if err != nil {
				x.writeErr(rw, err)
				return
			}
			x.logImport(ctx, companyID, src, out, "scan-projects")
			res.Imported = append(res.Imported, out.Imported...)
			res.Updated = append(res.Updated, out.Updated...)
			res.Skipped = append(res.Skipped, toAny(out.Skipped)...)
			res.Conflicts = append(res.Conflicts, toAny(out.Conflicts)...)
			res.Warnings = append(res.Warnings, out.Warnings...)
		}
	}
	sdk.WriteJSON(rw, http.StatusOK, res)
}
