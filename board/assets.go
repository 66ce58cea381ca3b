package board

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"path"
	"strings"

	"github.com/gofiber/fiber/v2"
)

//go:embed static
var staticFS embed.FS

// assetPrefix is where the board's static files are served, outside /api.
const assetPrefix = "/assets/"

// asset is one embedded static file with its content-hashed URL.
type asset struct {
	body        []byte
	contentType string
}

// assetTable maps each embedded file's name (its path under static/) to its content-hashed
// URL, and each URL to the file. A changed file gets a new URL, so URLs are cached for a year.
type assetTable struct {
	urls  map[string]string
	files map[string]*asset
}

// assets is built once from the embedded files.
var assets = mustAssetTable()

func mustAssetTable() *assetTable {
	t, err := newAssetTable(staticFS)
	if err != nil {
		panic(err)
	}
	return t
}

func newAssetTable(fsys fs.FS) (*assetTable, error) {
	t := &assetTable{urls: map[string]string{}, files: map[string]*asset{}}
	err := fs.WalkDir(fsys, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := fs.ReadFile(fsys, p)
		if err != nil {
			return fmt.Errorf("error reading embedded asset %s: %w", p, err)
		}
		name := strings.TrimPrefix(p, "static/")
		sum := sha256.Sum256(body)
		ext := path.Ext(name)
		url := assetPrefix + strings.TrimSuffix(name, ext) + "." + hex.EncodeToString(sum[:6]) + ext
		ct := mime.TypeByExtension(ext)
		if ct == "" {
			ct = "text/plain; charset=utf-8"
		}
		t.urls[name] = url
		t.files[url] = &asset{body: body, contentType: ct}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("error indexing the board's assets: %w", err)
	}
	return t, nil
}

// Asset returns the content-hashed URL of the embedded file name (its path under static/).
// An unknown name panics: templates name files that are compiled in.
func Asset(name string) string {
	u, ok := assets.urls[name]
	if !ok {
		panic("board: unknown asset " + name)
	}
	return u
}

// serveAsset serves a content-hashed asset with a year-long immutable cache lifetime.
func serveAsset(c *fiber.Ctx) error {
	a, ok := assets.files[c.Path()]
	if !ok {
		c.Set(fiber.HeaderCacheControl, "no-store")
		return c.Status(fiber.StatusNotFound).SendString("Not found")
	}
	c.Set(fiber.HeaderContentType, a.contentType)
	c.Set(fiber.HeaderCacheControl, "public, max-age=31536000, immutable")
	return c.Send(a.body)
}
