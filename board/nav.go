package board

// navItem is one sidebar link.
type navItem struct {
	// Key matches the page's layoutData.Nav, which marks the link as the current page.
	Key string
	// Path is the link's target: for company pages relative to /c/{companyId}, else absolute.
	Path  string
	Icon  string
	Label string
	// Badge, when set, is the path (relative to /c/{companyId}) of a count fragment the
	// link loads after the page (so no page waits for it).
	Badge string
}

// companyNav lists the company's pages in the sidebar, in order. Each area adds its line.
var companyNav = []navItem{
	{Key: "dashboard", Path: "", Icon: "dashboard", Label: "Dashboard"},
	{Key: "inbox", Path: "/inbox", Icon: "inbox", Label: "Inbox", Badge: "/inbox/badge"},
	{Key: "issues", Path: "/issues", Icon: "issues", Label: "Issues"},
	{Key: "agents", Path: "/agents", Icon: "agents", Label: "Agents"},
	{Key: "runs", Path: "/runs", Icon: "runs", Label: "Runs"},
	{Key: "routines", Path: "/routines", Icon: "routines", Label: "Routines"},
	{Key: "status-cards", Path: "/status-cards", Icon: "cards", Label: "Status cards"},
	{Key: "cases", Path: "/cases", Icon: "cases", Label: "Cases"},
	{Key: "costs", Path: "/costs", Icon: "costs", Label: "Costs"},
	{Key: "skills", Path: "/skills", Icon: "skills", Label: "Skills"},
	{Key: "folders", Path: "/folders", Icon: "folders", Label: "Folders"},
	{Key: "members", Path: "/members", Icon: "members", Label: "Members"},
	{Key: "activity", Path: "/activity", Icon: "activity", Label: "Activity"},
}

// instanceNav lists the instance's pages (plugins, adapters, settings) below the companies
// link; the API refuses them to anyone but an instance admin.
var instanceNav = []navItem{
	{Key: "plugins", Path: "/instance/plugins", Icon: "plugins", Label: "Plugins"},
	{Key: "adapters", Path: "/instance/adapters", Icon: "adapters", Label: "Adapters"},
	{Key: "instance-settings", Path: "/instance/settings", Icon: "settings", Label: "Instance settings"},
}
