package board

// navItem is one sidebar link.
type navItem struct {
	// Key matches the page's layoutData.Nav, which marks the link as the current page.
	Key string
	// Path is the link's target: for company pages relative to /c/{companyId}, else absolute.
	Path  string
	Icon  string
	Label string
}

// companyNav lists the company's pages in the sidebar, in order. Each area adds its line.
var companyNav = []navItem{
	{Key: "dashboard", Path: "", Icon: "dashboard", Label: "Dashboard"},
	{Key: "issues", Path: "/issues", Icon: "issues", Label: "Issues"},
	{Key: "agents", Path: "/agents", Icon: "agents", Label: "Agents"},
	{Key: "runs", Path: "/runs", Icon: "runs", Label: "Runs"},
}

// instanceNav lists the instance's pages (plugins, adapters, settings) below the companies
// link; the API refuses them to anyone but an instance admin.
var instanceNav = []navItem{}
