package backup_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	_ "github.com/keelhq/keel/extensions/all"
	"github.com/keelhq/keel/host"
	"github.com/keelhq/keel/host/backup"
	"github.com/keelhq/keel/host/pgembed"
	"github.com/keelhq/keel/sdktest"
)

func TestMain(m *testing.M) { sdktest.Main(m) }

// waitReady waits until the work extension serves.
func waitReady(t *testing.T, h *sdktest.Host) {
	t.Helper()
	sdktest.WaitFor(t, time.Minute, func() bool {
		res := h.Do("GET", "/api/plugins/work", nil)
		return res.Status == http.StatusOK && res.Map(t)["status"] == "ready"
	}, "the work extension to be ready")
}

// createIssue creates an issue over plain HTTP (safe off the test goroutine).
func createIssue(base, companyID, title string) error {
	body, _ := json.Marshal(map[string]any{"title": title})
	res, err := http.Post(base+"/api/companies/"+companyID+"/issues", "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		return fmt.Errorf("issue create answered %d", res.StatusCode)
	}
	return nil
}

// upload attaches data to an issue and returns the attachment id.
func upload(t *testing.T, h *sdktest.Host, companyID, issueID string, data []byte) string {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	w, err := mw.CreateFormFile("file", "blob.bin")
	require.NoError(t, err)
	_, err = w.Write(data)
	require.NoError(t, err)
	require.NoError(t, mw.Close())
	res := h.Do("POST", "/api/companies/"+companyID+"/issues/"+issueID+"/attachments", buf.Bytes(), "Content-Type", mw.FormDataContentType())
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	return res.Map(t)["id"].(string)
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestBackupUnderLoadRestores takes a backup through the API while issues are created
// concurrently, restores it into a fresh data dir with its own embedded cluster, and
// checks the restored tables hold exactly the rows the backup's snapshot counted and
// that the restored instance serves every attachment with its original hash.
func TestBackupUnderLoadRestores(t *testing.T) {
	var home string
	h := sdktest.Start(t, sdktest.Options{Builtins: true, Configure: func(c *host.Config) { home = c.Home }})
	waitReady(t, h)
	companyID := h.CreateCompany("Backup Co")

	hashes := map[string]string{} // attachment id -> sha256
	for i := range 3 {
		res := h.Do("POST", "/api/companies/"+companyID+"/issues", map[string]any{"title": fmt.Sprintf("with file %d", i)})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		data := make([]byte, 4096+i*1000)
		_, _ = rand.Read(data)
		hashes[upload(t, h, companyID, res.Map(t)["id"].(string), data)] = sha(data)
	}

	// Write load: issue creates on four connections until the backup is done.
	var created, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := createIssue(h.URL, companyID, fmt.Sprintf("load %d-%d", w, i)); err != nil {
					failed.Add(1)
					continue
				}
				created.Add(1)
			}
		}()
	}
	sdktest.WaitFor(t, time.Minute, func() bool { return created.Load() >= 10 }, "issues to be created under load")
	before := created.Load()
	res := h.Do("POST", "/api/instance/database-backups", nil)
	during := created.Load()
	close(stop)
	wg.Wait()
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	require.Zero(t, failed.Load(), "issue creates failed under the backup")

	var result backup.Result
	res.JSON(t, &result)
	require.Equal(t, filepath.Join(home, "backups"), filepath.Dir(result.Directory))
	require.Equal(t, backup.Retention{Root: filepath.Join(home, "backups"), KeepLast: 7, MaxAgeDays: 30, Kept: 1, Pruned: []string{}}, result.Retention)
	require.GreaterOrEqual(t, result.DurationMs, result.Timing.DatabaseMs)
	require.Positive(t, result.Database.Bytes)
	require.Positive(t, result.Database.Tables)
	require.GreaterOrEqual(t, result.Files.Count, 3+2) // the attachments and the two instance keys
	t.Logf("backup of %d tables (%d rows, %d bytes dumped) and %d files (%d bytes) in %d ms (database %d ms, files %d ms); %d issues created during it",
		result.Database.Tables, result.Database.Rows, result.Database.Bytes, result.Files.Count, result.Files.Bytes,
		result.DurationMs, result.Timing.DatabaseMs, result.Timing.FilesMs, during-before)

	m, err := backup.ReadManifest(result.Directory)
	require.NoError(t, err)
	issues := m.Database.Tables["ext_work.issues"]
	require.GreaterOrEqual(t, issues, 3+before, "the snapshot holds every issue created before the backup began")
	require.LessOrEqual(t, issues, 3+created.Load())
	for id, sum := range hashes {
		found := false
		for _, f := range m.Files {
			found = found || f.SHA256 == sum
		}
		require.True(t, found, "attachment %s is in the backup", id)
	}

	// Restore into a fresh data dir, with its own embedded cluster.
	tmp := t.TempDir()
	if os.Geteuid() == 0 {
		// The postgres user may traverse to the restored cluster, which then lives under
		// the test's temp dir (removed with it) rather than in /var/lib/keel.
		require.NoError(t, os.Chmod(filepath.Dir(tmp), 0o711))
		require.NoError(t, os.Chmod(tmp, 0o711))
	}
	restored := filepath.Join(tmp, "home")
	var stages []string
	rr, err := backup.Restore(context.Background(), backup.RestoreOptions{Dir: result.Directory, Home: restored,
		Progress: func(p backup.Progress) { stages = append(stages, p.Stage) }})
	require.NoError(t, err)
	require.Equal(t, len(m.Database.Tables), rr.Tables)
	require.Equal(t, len(m.Files), rr.Files)
	require.Contains(t, stages, "done")
	t.Logf("restored %d tables (%d rows) and %d files in %d ms", rr.Tables, rr.Rows, rr.Files, rr.DurationMs)

	// The restored tables, counted independently, hold the snapshot's rows.
	pg, err := pgembed.Start(context.Background(), pgembed.Config{DataDir: filepath.Join(restored, "db")})
	require.NoError(t, err)
	conn, err := pgx.Connect(context.Background(), pg.DSN("keel"))
	require.NoError(t, err)
	for table, want := range m.Database.Tables {
		var got int64
		schema, name, _ := strings.Cut(table, ".")
		require.NoError(t, conn.QueryRow(context.Background(), `SELECT count(*) FROM `+pgx.Identifier{schema, name}.Sanitize()).Scan(&got))
		require.Equal(t, want, got, "rows of %s", table)
	}
	require.NoError(t, conn.Close(context.Background()))
	require.NoError(t, pg.Stop())

	// A second restore into the now non-empty data dir is refused without --force.
	_, err = backup.Restore(context.Background(), backup.RestoreOptions{Dir: result.Directory, Home: restored})
	require.ErrorContains(t, err, "data dir "+restored+" is not empty: restore into an empty data dir, or pass --force to replace its contents")

	// The restored instance serves: the same issues and the same attachment bytes.
	h2 := sdktest.Start(t, sdktest.Options{Builtins: true, Configure: func(c *host.Config) { c.Home, c.DatabaseURL = restored, "" }})
	waitReady(t, h2)
	res = h2.Do("GET", "/api/companies/"+companyID+"/issues?limit=500", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var list []map[string]any
	res.JSON(t, &list)
	require.Len(t, list, int(issues))
	for id, sum := range hashes {
		res := h2.Do("GET", "/api/attachments/"+id+"/content", nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, sum, sha(res.Body), "attachment %s", id)
	}
}

// TestRetention keeps the newest backups of a small retention policy.
func TestRetention(t *testing.T) {
	t.Parallel()
	h := sdktest.Start(t, sdktest.Options{Configure: func(c *host.Config) { c.BackupDir = filepath.Join(t.TempDir(), "b"); c.BackupKeepLast = 2 }})
	var names []string
	var last backup.Result
	for range 3 {
		res := h.Do("POST", "/api/instance/database-backups", nil)
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		res.JSON(t, &last)
		names = append(names, last.Name)
	}
	require.Equal(t, 2, last.Retention.KeepLast)
	require.Equal(t, []string{names[0]}, last.Retention.Pruned)
	left, err := backup.List(last.Retention.Root)
	require.NoError(t, err)
	require.Equal(t, []string{names[2], names[1]}, left)
	_, err = os.Stat(filepath.Join(last.Retention.Root, names[0]))
	require.True(t, os.IsNotExist(err))
}
