package pgembed

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Exported sentinel errors. Errors returned by Start match them with
// errors.Is; their messages carry the details and the fix.
var (
	// ErrBinariesNotFound means no directory with the initdb and postgres
	// binaries was found.
	ErrBinariesNotFound = errors.New("postgresql server binaries not found")
	// ErrPortInUse means Config.Port is already taken on 127.0.0.1.
	ErrPortInUse = errors.New("port is already in use")
	// ErrDataDirOwner means the data dir belongs to a user other than the
	// one the server must run as.
	ErrDataDirOwner = errors.New("data dir is owned by another user")
	// ErrAlreadyRunning means a live postgres server already uses the data
	// dir.
	ErrAlreadyRunning = errors.New("postgres already running on data dir")
)

// kindError is a one-line, user-facing error that matches a sentinel.
type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// debianPGRoot is where Debian installs PostgreSQL server binaries.
const debianPGRoot = "/usr/lib/postgresql"

// fallbackRoot holds cluster directories the postgres user cannot reach at
// their requested location (see the package documentation).
var fallbackRoot = "/var/lib/keel"

// socketRoot holds the per-cluster socket directories. It is short on
// purpose: Unix socket paths must stay below ~100 bytes.
const socketRoot = "/tmp"

// shortHash returns the first 12 hex digits of sha256(s).
func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:12]
}

// findBinDir resolves the directory holding initdb and postgres.
func findBinDir(configured string) (string, error) {
	var candidates, lookedIn []string
	switch env := os.Getenv("SERVICE_PG_BIN_DIR"); {
	case configured != "":
		candidates = []string{configured}
		lookedIn = []string{configured + " (Config.BinDir)"}
	case env != "":
		candidates = []string{env}
		lookedIn = []string{env + " (SERVICE_PG_BIN_DIR)"}
	default:
		candidates = debianBinDirs()
		lookedIn = []string{filepath.Join(debianPGRoot, "*", "bin"), "$PATH"}
		if p, err := lookPathPostgres(); err == nil {
			candidates = append(candidates, filepath.Dir(p))
		}
	}
	for _, dir := range candidates {
		if isExecutable(filepath.Join(dir, "postgres")) && isExecutable(filepath.Join(dir, "initdb")) {
			return dir, nil
		}
	}
	return "", &kindError{ErrBinariesNotFound, fmt.Sprintf(
		"postgresql server binaries not found (looked in %s); install Debian's postgresql-15 package or set SERVICE_PG_BIN_DIR",
		strings.Join(lookedIn, ", "))}
}

// lookPathPostgres finds postgres on $PATH.
func lookPathPostgres() (string, error) {
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if dir == "" {
			continue
		}
		if p := filepath.Join(dir, "postgres"); isExecutable(p) {
			return p, nil
		}
	}
	return "", os.ErrNotExist
}

// debianBinDirs lists /usr/lib/postgresql/*/bin, newest version first.
func debianBinDirs() []string {
	entries, err := os.ReadDir(debianPGRoot)
	if err != nil {
		return nil
	}
	type ver struct {
		dir        string
		major, min int
	}
	var vs []ver
	for _, e := range entries {
		major, minor, _ := strings.Cut(e.Name(), ".")
		m, err := strconv.Atoi(major)
		if err != nil {
			continue
		}
		n, _ := strconv.Atoi(minor)
		vs = append(vs, ver{filepath.Join(debianPGRoot, e.Name(), "bin"), m, n})
	}
	sort.Slice(vs, func(i, j int) bool {
		if vs[i].major != vs[j].major {
			return vs[i].major > vs[j].major
		}
		return vs[i].min > vs[j].min
	})
	dirs := make([]string, len(vs))
	for i, v := range vs {
		dirs[i] = v.dir
	}
	return dirs
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// serverUser is the account initdb and postgres run as.
type serverUser struct {
	name   string
	uid    int
	gid    int
	groups map[int]bool        // primary and supplementary groups
	cred   *syscall.Credential // non-nil when keel runs as root
}

func (u serverUser) root() bool { return u.cred != nil }

// lookupServerUser returns the current user, or the postgres system user when
// running as root.
func lookupServerUser() (serverUser, error) {
	if os.Geteuid() != 0 {
		su := serverUser{uid: os.Geteuid(), gid: os.Getegid(), name: strconv.Itoa(os.Geteuid())}
		if u, err := user.LookupId(su.name); err == nil {
			su.name = u.Username
		}
		return su, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return serverUser{}, fmt.Errorf("running as root, but looking up the postgres system user to run the server as failed (%v); install Debian's postgresql-15 package, which creates it, or run keel as a non-root user", err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return serverUser{}, fmt.Errorf("looking up the postgres system user: non-numeric uid %q or gid %q", u.Uid, u.Gid)
	}
	su := serverUser{name: u.Username, uid: uid, gid: gid, groups: map[int]bool{gid: true}}
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	if ids, err := u.GroupIds(); err == nil {
		for _, s := range ids {
			if g, err := strconv.Atoi(s); err == nil {
				su.groups[g] = true
				if g != gid {
					cred.Groups = append(cred.Groups, uint32(g))
				}
			}
		}
	}
	su.cred = cred
	return su, nil
}

// canTraverse reports whether u may search every existing ancestor directory
// of dir (missing ones will be created with mode 0755). Symlinks in the
// existing part of the path are resolved first.
func (u serverUser) canTraverse(dir string) bool {
	resolved := resolveExisting(dir)
	for p := filepath.Dir(resolved); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err == nil {
			st, ok := fi.Sys().(*syscall.Stat_t)
			if !ok {
				return true
			}
			perm := fi.Mode().Perm()
			var bit os.FileMode = 0o001
			switch {
			case int(st.Uid) == u.uid:
				bit = 0o100
			case u.groups[int(st.Gid)]:
				bit = 0o010
			}
			if perm&bit == 0 {
				return false
			}
		}
		if p == filepath.Dir(p) {
			return true
		}
	}
}

// resolveExisting resolves symlinks in the longest existing prefix of p.
func resolveExisting(p string) string {
	rest := ""
	for cur := p; ; cur = filepath.Dir(cur) {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest)
		}
		if cur == filepath.Dir(cur) {
			return p
		}
		rest = filepath.Join(filepath.Base(cur), rest)
	}
}

// mkdirAll creates dir and its missing parents with mode perm, regardless of
// the umask.
func mkdirAll(dir string, perm os.FileMode) error {
	fi, err := os.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s exists and is not a directory", dir)
		}
		return nil
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := mkdirAll(parent, perm); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, perm); err != nil {
		if os.IsExist(err) {
			return nil
		}
		return err
	}
	return os.Chmod(dir, perm)
}

// prepareDataDir makes sure dir exists, belongs to u and has a mode postgres
// accepts (0700 or 0750).
func prepareDataDir(dir string, u serverUser, log func(msg string, args ...any)) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		if err := mkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return fmt.Errorf("creating parent of data dir %s: %w", dir, err)
		}
		if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
			return fmt.Errorf("creating data dir %s: %w", dir, err)
		}
		if u.root() {
			if err := os.Chown(dir, u.uid, u.gid); err != nil {
				return fmt.Errorf("handing data dir %s to user %s: %w", dir, u.name, err)
			}
		}
		fi, err = os.Stat(dir)
	}
	if err != nil {
		return fmt.Errorf("inspecting data dir %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("data dir %s exists and is not a directory; remove it or choose another data dir", dir)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if ok && int(st.Uid) != u.uid {
		if !u.root() || !dirEmpty(dir) {
			return &kindError{ErrDataDirOwner, fmt.Sprintf(
				"data dir %s is owned by uid %d, not by %s (uid %d), the user the server must run as; run `chown -R %s %s` or choose another data dir",
				dir, st.Uid, u.name, u.uid, u.name, dir)}
		}
		if err := os.Chown(dir, u.uid, u.gid); err != nil {
			return fmt.Errorf("handing empty data dir %s to user %s: %w", dir, u.name, err)
		}
		log("handed empty data dir over to the server user", "dir", dir, "user", u.name)
	}
	if perm := fi.Mode().Perm(); perm != 0o700 && perm != 0o750 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("setting mode 0700 on data dir %s: %w", dir, err)
		}
	}
	return nil
}

func dirEmpty(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	_, err = f.Readdirnames(1)
	return err == io.EOF
}

// prepareSocketDir makes sure the private socket dir exists as a real
// directory of mode 0700 owned by u.
func prepareSocketDir(dir string, u serverUser) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
			return fmt.Errorf("creating socket dir %s: %w", dir, err)
		}
		if u.root() {
			if err := os.Lchown(dir, u.uid, u.gid); err != nil {
				return fmt.Errorf("handing socket dir %s to user %s: %w", dir, u.name, err)
			}
		}
		fi, err = os.Lstat(dir)
	}
	if err != nil {
		return fmt.Errorf("inspecting socket dir %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("socket dir %s exists and is not a directory; remove it", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != u.uid {
		if !u.root() {
			return fmt.Errorf("socket dir %s is owned by uid %d, not by %s; remove it", dir, st.Uid, u.name)
		}
		// Someone else made it; start afresh rather than adopt its contents.
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("removing foreign socket dir %s: %w", dir, err)
		}
		return prepareSocketDir(dir, u)
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("setting mode 0700 on socket dir %s: %w", dir, err)
		}
	}
	return nil
}

// clearStaleServer removes a postmaster.pid left behind by a server that no
// longer runs, together with the socket lock files in sockDir. It fails with
// ErrAlreadyRunning when a live server uses dir.
func clearStaleServer(dir, sockDir string, log func(msg string, args ...any)) error {
	pidFile := filepath.Join(dir, "postmaster.pid")
	f, err := os.Open(pidFile)
	if errors.Is(err, os.ErrNotExist) {
		clearSocketLocks(sockDir)
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", pidFile, err)
	}
	line, _ := bufio.NewReader(f).ReadString('\n')
	f.Close()
	pid, _ := strconv.Atoi(strings.TrimSpace(line))
	resolved := dir
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		resolved = r
	}
	if pid > 0 && processAlive(pid) {
		isServer, known := procIsPostgresIn(pid, resolved)
		if isServer || !known {
			return &kindError{ErrAlreadyRunning, fmt.Sprintf(
				"postgres already running on data dir %s (pid %d); stop that server first or choose another data dir", dir, pid)}
		}
	}
	if err := os.Remove(pidFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing stale %s: %w", pidFile, err)
	}
	log("removed stale postmaster.pid", "dir", dir, "stale_pid", pid)
	reapOrphans(resolved, 3*time.Second)
	clearSocketLocks(sockDir)
	return nil
}

// clearSocketLocks removes leftover sockets and socket lock files. Their
// PIDs may have been reused by unrelated processes, which would make
// postgres refuse to start.
func clearSocketLocks(sockDir string) {
	matches, _ := filepath.Glob(filepath.Join(sockDir, ".s.PGSQL.*"))
	for _, m := range matches {
		_ = os.Remove(m)
	}
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// checkPort fails with ErrPortInUse when 127.0.0.1:port cannot be bound.
func checkPort(port int) error {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return &kindError{ErrPortInUse, fmt.Sprintf(
			"port %d is already in use; stop whatever listens on 127.0.0.1:%d or choose another port", port, port)}
	}
	return ln.Close()
}

// tail returns the last max lines of b joined into one line.
func tail(b []byte, max int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var kept []string
	for _, l := range lines {
		if l = strings.TrimSpace(l); l != "" {
			kept = append(kept, l)
		}
	}
	if len(kept) > max {
		kept = kept[len(kept)-max:]
	}
	if len(kept) == 0 {
		return "(no output)"
	}
	return strings.Join(kept, " | ")
}
