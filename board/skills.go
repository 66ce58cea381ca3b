package board

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/gofiber/fiber/v2"
	"golang.org/x/sync/errgroup"
)

// mountSkills adds the skills pages (list, detail with files and agents, create, import,
// assign) and the folders page (the skill and routine trees, filing items, folder writes).
func (b *Board) mountSkills(g fiber.Router) {
	g.Get("/c/:companyId/skills", b.skills)
	g.Post("/c/:companyId/skills", b.createSkill)
	g.Post("/c/:companyId/skills/import", b.importSkills)
	g.Get("/c/:companyId/skills/:skillId", b.skillDetail)
	g.Post("/c/:companyId/skills/:skillId/delete", b.deleteSkill)
	g.Post("/c/:companyId/skills/:skillId/agents", b.assignSkill)
	g.Post("/c/:companyId/skills/:skillId/files", b.saveSkillFile)
	g.Get("/c/:companyId/folders", b.folders)
	g.Post("/c/:companyId/folders", b.createFolder)
	g.Post("/c/:companyId/folders/items/move", b.moveFolderItem)
	g.Post("/c/:companyId/folders/:folderId/rename", b.renameFolder)
	g.Post("/c/:companyId/folders/:folderId/delete", b.deleteFolder)
}

// skillsData is the skills list page.
type skillsData struct {
	CompanyID  string
	CSRF       string
	Skills     []skill
	FolderName map[string]string
	CanCreate  bool
	// Imported says what the last import brought (shown once).
	Imported *skillImport
}

func (b *Board) loadSkills(c *fiber.Ctx, companyID string) (*skillsData, error) {
	d := &skillsData{CompanyID: companyID, CSRF: csrfOf(c), FolderName: map[string]string{}}
	v := visitorOf(c)
	base := "/api/companies/" + url.PathEscape(companyID)
	var listErr error
	var folders folderList
	var perms permSet
	var g errgroup.Group
	g.Go(func() error { listErr = b.api.callAs(v, "GET", base+"/skills", nil, nil, &d.Skills); return nil })
	g.Go(func() error {
		_ = b.api.callAs(v, "GET", base+"/folders", url.Values{"kind": {"skill"}}, nil, &folders)
		return nil
	})
	g.Go(func() error { perms = b.callerPermissions(v, companyID); return nil })
	_ = g.Wait()
	if listErr != nil {
		return nil, listErr
	}
	for _, f := range folders.Folders {
		d.FolderName[f.ID] = f.Path
	}
	d.CanCreate = perms.Has("agents:create")
	sort.SliceStable(d.Skills, func(i, j int) bool { return strings.ToLower(d.Skills[i].Name) < strings.ToLower(d.Skills[j].Name) })
	return d, nil
}

func (b *Board) skills(c *fiber.Ctx) error {
	id := c.Params("companyId")
	l, done, err := b.page(c, "Skills", "skills", id)
	if done {
		return err
	}
	d, err := b.loadSkills(c, id)
	if err != nil {
		return b.fail(c, l, err)
	}
	l.Notice = skillNotices[c.Query("done")]
	return render(c, http.StatusOK, skillsPage(l, d))
}

// skillNotices are the confirmations a skills write redirects with.
var skillNotices = map[string]string{
	"deleted":    "The skill was deleted.",
	"assigned":   "The skill was added to the agent's desired skills.",
	"unassigned": "The skill was removed from the agent's desired skills.",
	"created":    "The skill was created.",
	"saved":      "The file was saved.",
}

// skillsRefused shows the skills list again with the API's refusal and its status.
func (b *Board) skillsRefused(c *fiber.Ctx, writeErr error) error {
	id := c.Params("companyId")
	l, done, err := b.page(c, "Skills", "skills", id)
	if done {
		return err
	}
	var ae *apiError
	if !errors.As(writeErr, &ae) {
		return b.fail(c, l, writeErr)
	}
	d, err := b.loadSkills(c, id)
	if err != nil {
		return b.fail(c, l, err)
	}
	l.Error = refusalWithDetails(ae)
	return render(c, ae.Status, skillsPage(l, d))
}

func (b *Board) createSkill(c *fiber.Ctx) error {
	id := c.Params("companyId")
	body := map[string]any{"name": strings.TrimSpace(c.FormValue("name"))}
	if s := strings.TrimSpace(c.FormValue("description")); s != "" {
		body["description"] = s
	}
	if s := c.FormValue("markdown"); strings.TrimSpace(s) != "" {
		body["markdown"] = s
	}
	var s skill
	if err := b.api.call(c, "POST", "/api/companies/"+url.PathEscape(id)+"/skills", nil, body, &s); err != nil {
		return b.skillsRefused(c, err)
	}
	return c.Redirect("/c/"+id+"/skills/"+s.ID+"?done=created", http.StatusSeeOther)
}

// importSkills imports from a source and shows the list with what was imported.
func (b *Board) importSkills(c *fiber.Ctx) error {
	id := c.Params("companyId")
	var res skillImport
	body := map[string]any{"source": strings.TrimSpace(c.FormValue("source"))}
	if err := b.api.call(c, "POST", "/api/companies/"+url.PathEscape(id)+"/skills/import", nil, body, &res); err != nil {
		return b.skillsRefused(c, err)
	}
	l, done, err := b.page(c, "Skills", "skills", id)
	if done {
		return err
	}
	d, err := b.loadSkills(c, id)
	if err != nil {
		return b.fail(c, l, err)
	}
	d.Imported = &res
	return render(c, http.StatusOK, skillsPage(l, d))
}

// skillData is a skill's detail page.
type skillData struct {
	CompanyID string
	CSRF      string
	Skill     *skill
	File      *skillFileView
	// FileError is the API's refusal of the file asked for.
	FileError string
	// Others are the company's agents that do not want the skill yet.
	Others    []agent
	CanChange bool
}

func (b *Board) loadSkill(c *fiber.Ctx) (*skillData, error) {
	companyID, skillID := c.Params("companyId"), c.Params("skillId")
	d := &skillData{CompanyID: companyID, CSRF: csrfOf(c), Skill: &skill{}}
	v := visitorOf(c)
	base := "/api/companies/" + url.PathEscape(companyID)
	skillPath := base + "/skills/" + url.PathEscape(skillID)
	filePath := c.Query("path")
	if filePath == "" && c.Method() == http.MethodPost {
		filePath = c.FormValue("path")
	}
	if filePath == "" {
		filePath = "SKILL.md"
	}
	var skillErr, fileErr error
	var agents []agent
	var perms permSet
	d.File = &skillFileView{}
	var g errgroup.Group
	g.Go(func() error { skillErr = b.api.callAs(v, "GET", skillPath, nil, nil, d.Skill); return nil })
	g.Go(func() error {
		fileErr = b.api.callAs(v, "GET", skillPath+"/files", url.Values{"path": {filePath}}, nil, d.File)
		return nil
	})
	g.Go(func() error { _ = b.api.callAs(v, "GET", base+"/agents", nil, nil, &agents); return nil })
	g.Go(func() error { perms = b.callerPermissions(v, companyID); return nil })
	_ = g.Wait()
	if skillErr != nil {
		return nil, skillErr
	}
	if fileErr != nil {
		var ae *apiError
		if !errors.As(fileErr, &ae) {
			return nil, fileErr
		}
		d.File, d.FileError = nil, "The file "+filePath+" could not be read: "+ae.Message
	}
	using := map[string]bool{}
	for _, a := range d.Skill.UsedByAgents {
		using[a.ID] = true
	}
	for _, a := range agents {
		if !using[a.ID] && a.Status != "terminated" {
			d.Others = append(d.Others, a)
		}
	}
	d.CanChange = perms.Has("agents:create") || perms.Has("agents:configure")
	return d, nil
}

func (b *Board) skillDetail(c *fiber.Ctx) error {
	l, done, err := b.page(c, "Skill", "skills", c.Params("companyId"))
	if done {
		return err
	}
	d, err := b.loadSkill(c)
	if err != nil {
		return b.fail(c, l, err)
	}
	l.Title = d.Skill.Name + " · Skills"
	l.Notice = skillNotices[c.Query("done")]
	return render(c, http.StatusOK, skillPage(l, d))
}

// skillRefused shows the skill again with the API's refusal and its status.
func (b *Board) skillRefused(c *fiber.Ctx, writeErr error) error {
	l, done, err := b.page(c, "Skill", "skills", c.Params("companyId"))
	if done {
		return err
	}
	var ae *apiError
	if !errors.As(writeErr, &ae) {
		return b.fail(c, l, writeErr)
	}
	d, err := b.loadSkill(c)
	if err != nil {
		return b.fail(c, l, err)
	}
	l.Title = d.Skill.Name + " · Skills"
	l.Error = refusalWithDetails(ae)
	return render(c, ae.Status, skillPage(l, d))
}

func (b *Board) deleteSkill(c *fiber.Ctx) error {
	id := c.Params("companyId")
	path := "/api/companies/" + url.PathEscape(id) + "/skills/" + url.PathEscape(c.Params("skillId"))
	if err := b.api.call(c, "DELETE", path, nil, nil, nil); err != nil {
		return b.skillRefused(c, err)
	}
	return c.Redirect("/c/"+id+"/skills?done=deleted", http.StatusSeeOther)
}

// saveSkillFile writes a file of an editable skill (a new SKILL.md also renames and
// re-describes the skill) and shows it again.
func (b *Board) saveSkillFile(c *fiber.Ctx) error {
	id, skillID, path := c.Params("companyId"), c.Params("skillId"), c.FormValue("path")
	body := map[string]any{"path": path, "content": c.FormValue("content")}
	err := b.api.call(c, "PATCH", "/api/companies/"+url.PathEscape(id)+"/skills/"+url.PathEscape(skillID)+"/files", nil, body, nil)
	if err != nil {
		return b.skillRefused(c, err)
	}
	return c.Redirect("/c/"+id+"/skills/"+skillID+"?path="+url.QueryEscape(path)+"&done=saved", http.StatusSeeOther)
}

// assignSkill adds the skill to an agent's desired skills (action "add") or takes it out
// ("remove"), through the agents owner's skills sync, which replaces the whole list.
func (b *Board) assignSkill(c *fiber.Ctx) error {
	id, skillID := c.Params("companyId"), c.Params("skillId")
	agentID, action := c.FormValue("agentId"), c.FormValue("action", "add")
	if agentID == "" {
		return b.skillRefused(c, &apiError{Status: http.StatusBadRequest, Message: "Choose an agent"})
	}
	if action != "add" && action != "remove" {
		return b.skillRefused(c, &apiError{Status: http.StatusBadRequest, Message: "The action must be add or remove"})
	}
	var s skill
	if err := b.api.call(c, "GET", "/api/companies/"+url.PathEscape(id)+"/skills/"+url.PathEscape(skillID), nil, nil, &s); err != nil {
		return b.skillRefused(c, err)
	}
	var ag agentSkills
	if err := b.api.call(c, "GET", "/api/agents/"+url.PathEscape(agentID), nil, nil, &ag); err != nil {
		return b.skillRefused(c, err)
	}
	names := func(w string) bool {
		w = strings.ToLower(strings.TrimSpace(w))
		return w == s.Key || w == s.Slug || w == strings.ToLower(s.Name)
	}
	want := slices.DeleteFunc(slices.Clone(ag.DesiredSkills), names)
	if action == "add" {
		want = append(want, s.Key)
	}
	if want == nil {
		want = []string{}
	}
	body := map[string]any{"desiredSkills": want}
	if err := b.api.call(c, "POST", "/api/agents/"+url.PathEscape(agentID)+"/skills/sync", nil, body, nil); err != nil {
		return b.skillRefused(c, err)
	}
	done := "assigned"
	if action == "remove" {
		done = "unassigned"
	}
	return c.Redirect("/c/"+id+"/skills/"+skillID+"?done="+done, http.StatusSeeOther)
}

// bundledSource is the source type of the bundled skills, which cannot be moved or deleted.
const bundledSource = "service_bundled"

// folderKinds are the trees the folders page shows.
var folderKinds = []string{"skill", "routine"}

// folderNode is a folder of the tree with its items and child folders.
type folderNode struct {
	Folder   folder
	Items    []folderItem
	Children []*folderNode
}

// folderItem is a skill or a routine filed somewhere in a tree.
type folderItem struct {
	ID    string
	Name  string
	Link  string
	Where string
	// Fixed marks an item that stays where it is (bundled skills cannot be moved).
	Fixed bool
}

// foldersData is the folders page of one kind.
type foldersData struct {
	CompanyID string
	CSRF      string
	Kind      string
	Roots     []*folderNode
	Unfiled   []folderItem
	// Options are the move targets: every folder, by path.
	Options []folder
	Error   string
}

// loadFolders reads a kind's folders and items and builds the tree.
func (b *Board) loadFolders(c *fiber.Ctx, companyID, kind string) (*foldersData, error) {
	if !slices.Contains(folderKinds, kind) {
		kind = "skill"
	}
	d := &foldersData{CompanyID: companyID, CSRF: csrfOf(c), Kind: kind}
	v := visitorOf(c)
	base := "/api/companies/" + url.PathEscape(companyID)
	var list folderList
	var items []folderItem
	var where []*string
	var listErr, itemsErr error
	var g errgroup.Group
	g.Go(func() error {
		listErr = b.api.callAs(v, "GET", base+"/folders", url.Values{"kind": {kind}}, nil, &list)
		return nil
	})
	g.Go(func() error {
		if kind == "skill" {
			var skills []skill
			itemsErr = b.api.callAs(v, "GET", base+"/skills", nil, nil, &skills)
			for _, s := range skills {
				items = append(items, folderItem{ID: s.ID, Name: s.Name, Link: "/c/" + companyID + "/skills/" + s.ID,
					Fixed: s.SourceType == bundledSource})
				where = append(where, s.FolderID)
			}
			return nil
		}
		var routines []routineBrief
		itemsErr = b.api.callAs(v, "GET", base+"/routines", nil, nil, &routines)
		for _, r := range routines {
			items = append(items, folderItem{ID: r.ID, Name: r.Title})
			where = append(where, r.FolderID)
		}
		return nil
	})
	_ = g.Wait()
	if err := errors.Join(listErr, itemsErr); err != nil {
		return nil, err
	}
	nodes := make(map[string]*folderNode, len(list.Folders))
	for _, f := range list.Folders {
		nodes[f.ID] = &folderNode{Folder: f}
	}
	for _, f := range list.Folders {
		n := nodes[f.ID]
		if f.ParentID != nil && nodes[*f.ParentID] != nil {
			p := nodes[*f.ParentID]
			p.Children = append(p.Children, n)
		} else {
			d.Roots = append(d.Roots, n)
		}
	}
	for i, it := range items {
		if where[i] != nil && nodes[*where[i]] != nil {
			it.Where = *where[i]
			nodes[*where[i]].Items = append(nodes[*where[i]].Items, it)
		} else {
			d.Unfiled = append(d.Unfiled, it)
		}
	}
	d.Options = slices.Clone(list.Folders)
	sort.SliceStable(d.Options, func(i, j int) bool { return d.Options[i].Path < d.Options[j].Path })
	return d, nil
}

func (b *Board) folders(c *fiber.Ctx) error {
	id := c.Params("companyId")
	kind := c.Query("kind", "skill")
	if isFragment(c) {
		d, err := b.loadFolders(c, id, kind)
		if err != nil {
			return b.fail(c, nil, err)
		}
		return render(c, http.StatusOK, folderTree(d))
	}
	l, done, err := b.page(c, "Folders", "folders", id)
	if done {
		return err
	}
	d, err := b.loadFolders(c, id, kind)
	if err != nil {
		return b.fail(c, l, err)
	}
	return render(c, http.StatusOK, foldersPage(l, d))
}

// afterFolderWrite answers a folders form: htmx gets the fresh tree (a refusal shown in it,
// with a 200 so htmx swaps it in), a plain form a redirect back to the tree or the page
// again with the API's refusal and its status.
func (b *Board) afterFolderWrite(c *fiber.Ctx, writeErr error) error {
	id, kind := c.Params("companyId"), c.FormValue("kind", "skill")
	if !slices.Contains(folderKinds, kind) {
		kind = "skill"
	}
	var ae *apiError
	if writeErr != nil && !errors.As(writeErr, &ae) {
		return b.fail(c, nil, writeErr)
	}
	if isFragment(c) {
		d, err := b.loadFolders(c, id, kind)
		if err != nil {
			return b.fail(c, nil, err)
		}
		if ae != nil {
			d.Error = refusalWithDetails(ae)
		}
		return render(c, http.StatusOK, folderTree(d))
	}
	if writeErr == nil {
		return c.Redirect("/c/"+id+"/folders?kind="+kind, http.StatusSeeOther)
	}
	l, done, err := b.page(c, "Folders", "folders", id)
	if done {
		return err
	}
	d, err := b.loadFolders(c, id, kind)
	if err != nil {
		return b.fail(c, l, err)
	}
	d.Error = refusalWithDetails(ae)
	return render(c, ae.Status, foldersPage(l, d))
}

func foldersPath(c *fiber.Ctx) string {
	return "/api/companies/" + url.PathEscape(c.Params("companyId")) + "/folders"
}

// moveFolderItem files an item into a folder, or unfiles it (an empty folderId).
func (b *Board) moveFolderItem(c *fiber.Ctx) error {
	body := map[string]any{"kind": c.FormValue("kind"), "itemId": c.FormValue("itemId"), "folderId": nil}
	if f := c.FormValue("folderId"); f != "" {
		body["folderId"] = f
	}
	return b.afterFolderWrite(c, b.api.call(c, "POST", foldersPath(c)+"/items/move", nil, body, nil))
}

func (b *Board) createFolder(c *fiber.Ctx) error {
	body := map[string]any{"kind": c.FormValue("kind"), "name": strings.TrimSpace(c.FormValue("name"))}
	if p := c.FormValue("parentId"); p != "" {
		body["parentId"] = p
	}
	return b.afterFolderWrite(c, b.api.call(c, "POST", foldersPath(c), nil, body, nil))
}

func (b *Board) renameFolder(c *fiber.Ctx) error {
	body := map[string]any{"name": strings.TrimSpace(c.FormValue("name"))}
	return b.afterFolderWrite(c, b.api.call(c, "PATCH", foldersPath(c)+"/"+url.PathEscape(c.Params("folderId")), nil, body, nil))
}

func (b *Board) deleteFolder(c *fiber.Ctx) error {
	return b.afterFolderWrite(c, b.api.call(c, "DELETE", foldersPath(c)+"/"+url.PathEscape(c.Params("folderId")), nil, nil, nil))
}

// folderOptionLabel is a move target as the "move to" select shows it.
func folderOptionLabel(f folder) string {
	return strings.Repeat("— ", max(0, f.Depth-1)) + f.Name + " (" + f.Path + ")"
}

// urlQueryEscape escapes a query value for a link.
func urlQueryEscape(s string) string { return url.QueryEscape(s) }

// currentFile is the aria-current value of a file link: "page" for the file shown.
func currentFile(d *skillData, path string) string {
	if d.File != nil && d.File.Path == path {
		return "page"
	}
	return "false"
}

// draggable is the draggable attribute of a folder item.
func draggable(it folderItem) string {
	if it.Fixed {
		return "false"
	}
	return "true"
}
