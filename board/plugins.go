package board

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/gofiber/fiber/v2"
	"golang.org/x/sync/errgroup"
)

// mountPlugins adds the instance admin's plugin and adapter pages.
func (b *Board) mountPlugins(g fiber.Router) {
	b.mountExtensionUI(g)
	g.Get("/instance/plugins", b.pluginsPage)
	g.Post("/instance/plugins/install", b.installPlugin)
	g.Get("/instance/plugins/:pluginId", b.pluginPage)
	g.Get("/instance/plugins/:pluginId/state", b.pluginStateFragment)
	g.Get("/instance/plugins/:pluginId/health", b.pluginHealthFragment)
	g.Get("/instance/plugins/:pluginId/logs", b.pluginLogsFragment)
	g.Post("/instance/plugins/:pluginId/config", b.configurePlugin)
	g.Post("/instance/plugins/:pluginId/:action", b.pluginAction)
	g.Get("/instance/adapters", b.adaptersPage)
	g.Post("/instance/adapters/install", b.installAdapter)
	g.Get("/instance/adapters/:type", b.adapterPage)
	g.Post("/instance/adapters/:type/config", b.configureAdapter)
	g.Post("/instance/adapters/:type/:action", b.adapterAction)
}

// pluginDone are the notices of the plugin pages after a write (?done=…).
var pluginDone = map[string]string{
	"installed": "The plugin was installed.", "enabled": "The plugin was enabled.", "disabled": "The plugin was disabled: it is stopped and its UI contributions are hidden.",
	"upgraded": "The plugin was upgraded.", "uninstalled": "The plugin was uninstalled; its data is kept for a reinstall.",
	"purged": "The plugin was uninstalled and its data purged.", "configured": "The config was saved and delivered to the plugin.",
	"adapter-installed": "The adapter was installed.", "adapter-saved": "The adapter was updated.", "adapter-removed": "The adapter was removed.",
}

// pluginsData is the plugin list page.
type pluginsData struct {
	CSRF    string
	Plugins []plugin
	Catalog []bundledPlugin
	// Installed marks the catalog entries already installed, by plugin key.
	Installed map[string]bool
	Package   string
	IsPath    bool
	Version   string
}

// terminalPluginStatus says whether an install has settled (no more progress to poll).
func terminalPluginStatus(s string) bool {
	switch s {
	case "ready", "error", "disabled", "upgrade_pending", "uninstalled", "purged":
		return true
	}
	return false
}

func (b *Board) pluginsPage(c *fiber.Ctx) error {
	l, done, err := b.page(c, "Plugins", "plugins", "")
	if done {
		return err
	}
	l.Notice = pluginDone[c.Query("done")]
	d := &pluginsData{CSRF: l.CSRF, Installed: map[string]bool{}}
	if err := b.loadPlugins(c, d); err != nil {
		return b.fail(c, l, err)
	}
	return render(c, http.StatusOK, pluginsPage(l, d))
}

// loadPlugins reads the installed plugins and the bundled catalog in parallel.
func (b *Board) loadPlugins(c *fiber.Ctx, d *pluginsData) error {
	v := visitorOf(c)
	var g errgroup.Group
	g.Go(func() error {
		return b.api.callAs(v, "GET", "/api/plugins", url.Values{"manifest": {"false"}}, nil, &d.Plugins)
	})
	g.Go(func() error { return b.api.callAs(v, "GET", "/api/plugins/examples", nil, nil, &d.Catalog) })
	if err := g.Wait(); err != nil {
		return err
	}
	for _, p := range d.Plugins {
		d.Installed[p.PluginKey] = true
	}
	return nil
}

// installPlugin installs from the catalog (its local path) or from a path or registry name
// typed in. htmx gets the install's progress row, which polls until the plugin settles; a
// plain form is sent to the plugin's page.
func (b *Board) installPlugin(c *fiber.Ctx) error {
	body := map[string]any{}
	if cat := strings.TrimSpace(c.FormValue("catalog")); cat != "" {
		body["packageName"], body["isLocalPath"] = cat, true
	} else {
		body["packageName"] = strings.TrimSpace(c.FormValue("packageName"))
		body["isLocalPath"] = c.FormValue("isLocalPath") != ""
		if v := strings.TrimSpace(c.FormValue("version")); v != "" {
			body["version"] = v
		}
	}
	var p plugin
	err := b.api.call(c, "POST", "/api/plugins/install", nil, body, &p)
	var ae *apiError
	if err != nil && !errors.As(err, &ae) {
		return b.fail(c, nil, err)
	}
	if isFragment(c) {
		if err != nil {
			return render(c, ae.Status, refusal("The plugin was not installed: "+ae.Message))
		}
		return render(c, http.StatusOK, pluginProgress(&p))
	}
	if err != nil {
		l, done, ferr := b.page(c, "Plugins", "plugins", "")
		if done {
			return ferr
		}
		d := &pluginsData{CSRF: l.CSRF, Installed: map[string]bool{}, Package: stringOf(body["packageName"]), IsPath: body["isLocalPath"] == true,
			Version: c.FormValue("version")}
		_ = b.loadPlugins(c, d) // the refusal is what the page shows
		l.Error = "The plugin was not installed: " + ae.Message
		return render(c, ae.Status, pluginsPage(l, d))
	}
	return c.Redirect("/instance/plugins/"+url.PathEscape(p.ID)+"?done=installed", http.StatusSeeOther)
}

// stringOf is v when it is a string, else "".
func stringOf(v any) string {
	s, _ := v.(string)
	return s
}

// pluginStateFragment answers the install progress row (polled while the plugin starts).
func (b *Board) pluginStateFragment(c *fiber.Ctx) error {
	var p plugin
	if err := b.api.call(c, "GET", "/api/plugins/"+url.PathEscape(c.Params("pluginId")), nil, nil, &p); err != nil {
		return b.fail(c, nil, err)
	}
	return render(c, http.StatusOK, pluginProgress(&p))
}

// pluginData is the plugin detail page.
type pluginData struct {
	CSRF     string
	Plugin   plugin
	Health   *pluginHealth
	HealthOK bool
	Logs     []pluginLogLine
	HasForm  bool
	Form     *schemaForm
	// ConfigError is why the config could not be read or shown.
	ConfigError string
	// Settings are the plugin's instance.settingsPage slots, rendered.
	Settings []renderedSlot
}

// loadPlugin reads a plugin, its health, logs and config in parallel.
func (b *Board) loadPlugin(c *fiber.Ctx) (*pluginData, *pluginConfig, error) {
	id := url.PathEscape(c.Params("pluginId"))
	d := &pluginData{CSRF: csrfOf(c), Health: &pluginHealth{}}
	cfg := &pluginConfig{}
	v := visitorOf(c)
	var g errgroup.Group
	var cfgErr error
	g.Go(func() error { return b.api.callAs(v, "GET", "/api/plugins/"+id, nil, nil, &d.Plugin) })
	g.Go(func() error {
		d.HealthOK = b.api.callAs(v, "GET", "/api/plugins/"+id+"/health", nil, nil, d.Health) == nil
		return nil
	})
	g.Go(func() error {
		_ = b.api.callAs(v, "GET", "/api/plugins/"+id+"/logs", url.Values{"limit": {"100"}}, nil, &d.Logs)
		return nil
	})
	g.Go(func() error {
		cfgErr = b.api.callAs(v, "GET", "/api/plugins/"+id+"/config", nil, nil, cfg)
		return nil
	})
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	if cfgErr != nil {
		d.ConfigError = "The config could not be read: " + cfgErr.Error()
		return d, nil, nil
	}
	return d, cfg, nil
}

// pluginConfigForm builds the config form of a plugin from its schema, filled from the
// stored config or what was posted.
func pluginConfigForm(d *pluginData, cfg *pluginConfig, posted url.Values, errs map[string]string) (*formSchema, map[string]any) {
	if cfg == nil {
		return nil, nil
	}
	var current map[string]any
	_ = json.Unmarshal(cfg.ConfigJSON, &current)
	s, err := parseFormSchema(cfg.ConfigSchema)
	if err != nil {
		d.ConfigError = "The plugin's config schema cannot be shown as a form: " + err.Error()
		return nil, current
	}
	d.HasForm = len(s.Properties) > 0
	d.Form = newSchemaForm(s, "cfg", current, posted, errs)
	return s, current
}

func (b *Board) pluginPage(c *fiber.Ctx) error {
	l, done, err := b.page(c, "Plugin", "plugins", "")
	if done {
		return err
	}
	d, cfg, err := b.loadPlugin(c)
	if err != nil {
		return b.fail(c, l, err)
	}
	pluginConfigForm(d, cfg, nil, nil)
	d.Settings = b.instanceSettingsSlots(c, &d.Plugin)
	l.Title = d.Plugin.DisplayName()
	l.Notice = pluginDone[c.Query("done")]
	return render(c, http.StatusOK, pluginPage(l, d))
}

func (b *Board) pluginHealthFragment(c *fiber.Ctx) error {
	var h pluginHealth
	if err := b.api.call(c, "GET", "/api/plugins/"+url.PathEscape(c.Params("pluginId"))+"/health", nil, nil, &h); err != nil {
		return b.fail(c, nil, err)
	}
	return render(c, http.StatusOK, pluginHealthBadge(&h, true))
}

func (b *Board) pluginLogsFragment(c *fiber.Ctx) error {
	var logs []pluginLogLine
	q := url.Values{"limit": {"100"}}
	if lv := c.Query("level"); lv != "" {
		q.Set("level", lv)
	}
	if err := b.api.call(c, "GET", "/api/plugins/"+url.PathEscape(c.Params("pluginId"))+"/logs", q, nil, &logs); err != nil {
		return b.fail(c, nil, err)
	}
	return render(c, http.StatusOK, pluginLogs(c.Params("pluginId"), logs))
}

// pluginAction enables, disables, upgrades or uninstalls a plugin; a refusal is shown on
// the plugin's page.
func (b *Board) pluginAction(c *fiber.Ctx) error {
	id := url.PathEscape(c.Params("pluginId"))
	var (
		method, path = "POST", "/api/plugins/" + id + "/" + c.Params("action")
		body         any
		query        url.Values
		doneKey      = c.Params("action") + "d"
		back         = "/instance/plugins/" + id
	)
	switch c.Params("action") {
	case "enable", "disable":
	case "upgrade":
		body = map[string]any{"version": strings.TrimSpace(c.FormValue("version"))}
	case "uninstall":
		method, path, doneKey, back = "DELETE", "/api/plugins/"+id, "uninstalled", "/instance/plugins"
		if c.FormValue("purge") != "" {
			query, doneKey = url.Values{"purge": {"true"}}, "purged"
		}
	default:
		return b.fail(c, nil, &apiError{Status: http.StatusNotFound, Message: "No such plugin action"})
	}
	err := b.api.call(c, method, path, query, body, nil)
	if err == nil {
		return c.Redirect(back+"?done="+doneKey, http.StatusSeeOther)
	}
	var ae *apiError
	if !errors.As(err, &ae) {
		return b.fail(c, nil, err)
	}
	l, done, ferr := b.page(c, "Plugin", "plugins", "")
	if done {
		return ferr
	}
	d, cfg, lerr := b.loadPlugin(c)
	if lerr != nil {
		return b.fail(c, l, lerr)
	}
	pluginConfigForm(d, cfg, nil, nil)
	l.Title = d.Plugin.DisplayName()
	l.Error = "The plugin could not " + c.Params("action") + ": " + ae.Message
	return render(c, ae.Status, pluginPage(l, d))
}

// configurePlugin saves the config form: fields the schema refuses are shown beside the
// form (400) without a call; the API's own refusal is shown above it.
func (b *Board) configurePlugin(c *fiber.Ctx) error {
	l, done, err := b.page(c, "Plugin", "plugins", "")
	if done {
		return err
	}
	d, cfg, err := b.loadPlugin(c)
	if err != nil {
		return b.fail(c, l, err)
	}
	l.Title = d.Plugin.DisplayName()
	posted, err := url.ParseQuery(string(c.Body()))
	if err != nil {
		posted = url.Values{}
	}
	s, current := pluginConfigForm(d, cfg, nil, nil)
	if s == nil {
		l.Error = d.ConfigError
		return render(c, http.StatusBadRequest, pluginPage(l, d))
	}
	value, errs := parseSchemaForm(s, "cfg", posted, current)
	if len(errs) > 0 {
		pluginConfigForm(d, cfg, posted, errs)
		return render(c, http.StatusBadRequest, pluginPage(l, d))
	}
	err = b.api.call(c, "POST", "/api/plugins/"+url.PathEscape(c.Params("pluginId"))+"/config", nil, map[string]any{"configJson": value}, nil)
	if err == nil {
		return c.Redirect("/instance/plugins/"+url.PathEscape(c.Params("pluginId"))+"?done=configured", http.StatusSeeOther)
	}
	var ae *apiError
	if !errors.As(err, &ae) {
		return b.fail(c, l, err)
	}
	pluginConfigForm(d, cfg, posted, nil)
	l.Error = "The config was not saved: " + ae.Message
	return render(c, ae.Status, pluginPage(l, d))
}

// adaptersData is the adapter registry page.
type adaptersData struct {
	CSRF     string
	Adapters []adapterType
	// CanManage is true for an instance admin (the registry is readable by every board
	// user; its writes are the admin's).
	CanManage bool
}

// isInstanceAdmin asks the API whether the visitor is an instance admin.
func (b *Board) isInstanceAdmin(v *visitor) bool {
	var me struct {
		IsInstanceAdmin bool `json:"isInstanceAdmin"`
	}
	return b.api.callAs(v, "GET", "/api/cli-auth/me", nil, nil, &me) == nil && me.IsInstanceAdmin
}

func (b *Board) adaptersPage(c *fiber.Ctx) error {
	l, done, err := b.page(c, "Adapters", "adapters", "")
	if done {
		return err
	}
	return b.renderAdapters(c, l, http.StatusOK)
}

func (b *Board) renderAdapters(c *fiber.Ctx, l *layoutData, status int) error {
	if l.Notice == "" {
		l.Notice = pluginDone[c.Query("done")]
	}
	d := &adaptersData{CSRF: l.CSRF}
	v := visitorOf(c)
	var g errgroup.Group
	g.Go(func() error { return b.api.callAs(v, "GET", "/api/adapters", nil, nil, &d.Adapters) })
	g.Go(func() error { d.CanManage = b.isInstanceAdmin(v); return nil })
	if err := g.Wait(); err != nil {
		return b.fail(c, l, err)
	}
	return render(c, status, adaptersPage(l, d))
}

// adapterWriteFailed shows an adapter write's refusal on the registry page.
func (b *Board) adapterWriteFailed(c *fiber.Ctx, what string, err error) error {
	var ae *apiError
	if !errors.As(err, &ae) {
		return b.fail(c, nil, err)
	}
	l, done, ferr := b.page(c, "Adapters", "adapters", "")
	if done {
		return ferr
	}
	l.Error = what + ": " + ae.Message
	return b.renderAdapters(c, l, ae.Status)
}

func (b *Board) installAdapter(c *fiber.Ctx) error {
	body := map[string]any{"packageName": strings.TrimSpace(c.FormValue("packageName")), "isLocalPath": c.FormValue("isLocalPath") != ""}
	if v := strings.TrimSpace(c.FormValue("version")); v != "" {
		body["version"] = v
	}
	if err := b.api.call(c, "POST", "/api/adapters/install", nil, body, nil); err != nil {
		return b.adapterWriteFailed(c, "The adapter was not installed", err)
	}
	return c.Redirect("/instance/adapters?done=adapter-installed", http.StatusSeeOther)
}

// adapterAction disables, enables, pauses or resumes the override of, reloads or removes
// an adapter type.
func (b *Board) adapterAction(c *fiber.Ctx) error {
	typ := url.PathEscape(c.Params("type"))
	method, path, done := "PATCH", "/api/adapters/"+typ, "adapter-saved"
	var body any
	switch c.Params("action") {
	case "disable", "enable":
		body = map[string]any{"disabled": c.Params("action") == "disable"}
	case "pause", "resume":
		path, body = path+"/override", map[string]any{"paused": c.Params("action") == "pause"}
	case "reload", "reinstall":
		method, path = "POST", path+"/"+c.Params("action")
	case "remove":
		method, done = "DELETE", "adapter-removed"
	default:
		return b.fail(c, nil, &apiError{Status: http.StatusNotFound, Message: "No such adapter action"})
	}
	if err := b.api.call(c, method, path, nil, body, nil); err != nil {
		return b.adapterWriteFailed(c, "The adapter could not "+c.Params("action"), err)
	}
	return c.Redirect("/instance/adapters?done="+done, http.StatusSeeOther)
}

// adapterData is one adapter type's page: its registry entry and instance config form.
type adapterData struct {
	CSRF      string
	Adapter   adapterType
	HasForm   bool
	Form      *schemaForm
	CanManage bool
}

// loadAdapter reads an adapter type, its config schema and (from the serving extension)
// its current config.
func (b *Board) loadAdapter(c *fiber.Ctx, posted url.Values, errs map[string]string) (*adapterData, *formSchema, map[string]any, error) {
	typ := url.PathEscape(c.Params("type"))
	d := &adapterData{CSRF: csrfOf(c)}
	var sch adapterSchema
	v := visitorOf(c)
	var g errgroup.Group
	g.Go(func() error { return b.api.callAs(v, "GET", "/api/adapters/"+typ, nil, nil, &d.Adapter) })
	g.Go(func() error { return b.api.callAs(v, "GET", "/api/adapters/"+typ+"/config-schema", nil, nil, &sch) })
	g.Go(func() error { d.CanManage = b.isInstanceAdmin(v); return nil })
	if err := g.Wait(); err != nil {
		return nil, nil, nil, err
	}
	var current map[string]any
	if sch.Key != "" {
		var cfg pluginConfig
		if b.api.callAs(v, "GET", "/api/plugins/"+url.PathEscape(sch.Key)+"/config", nil, nil, &cfg) == nil {
			_ = json.Unmarshal(cfg.ConfigJSON, &current)
		}
	}
	s, err := parseFormSchema(sch.ConfigSchema)
	if err != nil {
		return d, nil, current, nil
	}
	d.HasForm = len(s.Properties) > 0
	d.Form = newSchemaForm(s, "cfg", current, posted, errs)
	return d, s, current, nil
}

func (b *Board) adapterPage(c *fiber.Ctx) error {
	l, done, err := b.page(c, "Adapter", "adapters", "")
	if done {
		return err
	}
	d, _, _, err := b.loadAdapter(c, nil, nil)
	if err != nil {
		return b.fail(c, l, err)
	}
	l.Title = "Adapter " + d.Adapter.Type
	l.Notice = pluginDone[c.Query("done")]
	return render(c, http.StatusOK, adapterPage(l, d))
}

// configureAdapter saves an adapter type's instance config through PATCH /api/adapters/{type}.
func (b *Board) configureAdapter(c *fiber.Ctx) error {
	l, done, err := b.page(c, "Adapter", "adapters", "")
	if done {
		return err
	}
	d, s, current, err := b.loadAdapter(c, nil, nil)
	if err != nil {
		return b.fail(c, l, err)
	}
	l.Title = "Adapter " + d.Adapter.Type
	if s == nil || !d.HasForm {
		l.Error = "This adapter has no instance config."
		return render(c, http.StatusBadRequest, adapterPage(l, d))
	}
	posted, perr := url.ParseQuery(string(c.Body()))
	if perr != nil {
		posted = url.Values{}
	}
	value, errs := parseSchemaForm(s, "cfg", posted, current)
	if len(errs) == 0 {
		err = b.api.call(c, "PATCH", "/api/adapters/"+url.PathEscape(c.Params("type")), nil, map[string]any{"config": value}, nil)
		if err == nil {
			return c.Redirect("/instance/adapters/"+url.PathEscape(c.Params("type"))+"?done=adapter-saved", http.StatusSeeOther)
		}
	}
	status := http.StatusBadRequest
	var ae *apiError
	if err != nil {
		if !errors.As(err, &ae) {
			return b.fail(c, l, err)
		}
		status, l.Error = ae.Status, "The config was not saved: "+ae.Message
	}
	d.Form = newSchemaForm(s, "cfg", current, posted, errs)
	return render(c, status, adapterPage(l, d))
}

// ifStr is a when cond holds, else b.
func ifStr(cond bool, a, b string) string {
	if cond {
		return a
	}
	return b
}

// joinStrings lists names separated by commas.
func joinStrings(names []string) string { return strings.Join(names, ", ") }
