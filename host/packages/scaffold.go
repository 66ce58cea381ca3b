package packages

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"
)

//go:embed scaffold/*.tmpl
var scaffoldFS embed.FS

// keelModule is keel's Go module path; a new extension requires it for its test harness
// (github.com/keelhq/keel/sdktest). sdkModule is the SDK's own module, which the extension
// itself imports.
const (
	keelModule = "github.com/keelhq/keel"
	sdkModule  = keelModule + "/sdk"
)

// ScaffoldOptions say what `keel extension new` writes.
type ScaffoldOptions struct {
	// Dir is the directory to create (it must not exist, or be empty).
	Dir string
	// Name is the extension's name: lowercase letters, digits and dashes. Its key is the
	// name with dashes as underscores.
	Name string
	// Wasm writes a wasm extension instead of a process extension.
	Wasm bool
	// KeelSource is a keel checkout the new module builds against (a replace directive);
	// empty leaves the requirement to the module proxy.
	KeelSource string
	// GoVersion is the go directive of the new module (default keel's).
	GoVersion string
}

var scaffoldName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}$`)

// Scaffold writes a working extension: manifest, main.go with one route, a test that runs
// it in a real host through github.com/keelhq/keel/sdktest, a Makefile (build, test, pack), a README and a
// go.mod. The caller runs `go mod tidy` in the directory afterwards.
func Scaffold(opts ScaffoldOptions) error {
	if !scaffoldName.MatchString(opts.Name) || strings.HasSuffix(opts.Name, "-") {
		return fmt.Errorf("extension name %q must be 1-40 lowercase letters, digits and dashes, starting with a letter", opts.Name)
	}
	if entries, err := os.ReadDir(opts.Dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("%s exists and is not empty", opts.Dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("error reading %s: %w", opts.Dir, err)
	}
	data := struct {
		Name, Key string
		Wasm      bool
	}{opts.Name, strings.ReplaceAll(opts.Name, "-", "_"), opts.Wasm}
	kind := "process"
	if opts.Wasm {
		kind = "wasm"
	}
	files := map[string]string{
		"manifest.json": "manifest.json.tmpl", "main.go": kind + "_main.go.tmpl", "main_test.go": kind + "_main_test.go.tmpl",
		"Makefile": "Makefile.tmpl", "README.md": "README.md.tmpl", ".gitignore": "gitignore.tmpl",
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return fmt.Errorf("error creating %s: %w", opts.Dir, err)
	}
	for name, tmpl := range files {
		t, err := template.ParseFS(scaffoldFS, "scaffold/"+tmpl)
		if err != nil {
			return fmt.Errorf("error reading template %s: %w", tmpl, err)
		}
		var buf bytes.Buffer
		if err := t.Execute(&buf, data); err != nil {
			return fmt.Errorf("error writing %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(opts.Dir, name), buf.Bytes(), 0o644); err != nil {
			return fmt.Errorf("error writing %s: %w", name, err)
		}
	}
	goVersion := opts.GoVersion
	var mod strings.Builder
	if opts.KeelSource != "" {
		if v, err := goDirective(filepath.Join(opts.KeelSource, "go.mod")); err == nil && goVersion == "" {
			goVersion = v
		}
	}
	if goVersion == "" {
		goVersion = "1.26"
	}
	fmt.Fprintf(&mod, "module %s\n\ngo %s\n\nrequire (\n\t%s v0.0.0\n\t%s v0.0.0\n)\n", opts.Name, goVersion, keelModule, sdkModule)
	if opts.KeelSource != "" {
		fmt.Fprintf(&mod, "\nreplace %s => %s\n\nreplace %s => %s\n", keelModule, opts.KeelSource, sdkModule, filepath.Join(opts.KeelSource, "sdk"))
		// keel's go.sum covers every module the new one needs, so `go mod tidy` works
		// from the module cache alone.
		if sum, err := os.ReadFile(filepath.Join(opts.KeelSource, "go.sum")); err == nil {
			if err := os.WriteFile(filepath.Join(opts.Dir, "go.sum"), sum, 0o644); err != nil {
				return fmt.Errorf("error writing go.sum: %w", err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(opts.Dir, "go.mod"), []byte(mod.String()), 0o644); err != nil {
		return fmt.Errorf("error writing go.mod: %w", err)
	}
	return nil
}

// goDirective reads the go directive of a go.mod.
func goDirective(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "go "); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", errors.New("no go directive")
}

// FindKeelSource returns the keel checkout above the executable or the working directory
// (a go.mod declaring keel's module), or "".
func FindKeelSource() string {
	var starts []string
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			starts = append(starts, filepath.Dir(real))
		}
	}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	for _, start := range starts {
		for dir := start; ; dir = filepath.Dir(dir) {
			if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
				first, _, _ := strings.Cut(string(b), "\n")
				if strings.TrimSpace(first) == "module "+keelModule {
					return dir
				}
			}
			if parent := filepath.Dir(dir); parent == dir {
				break
			}
		}
	}
	return ""
}
