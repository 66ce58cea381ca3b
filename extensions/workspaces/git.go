package workspaces

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// gitTimeout bounds one git command.
const gitTimeout = 2 * time.Minute

// gitResult is a finished git command.
type gitResult struct {
	Args           []string
	Stdout, Stderr string
	ExitCode       int
}

// commandLine is the command as the operations log shows it.
func (r *gitResult) commandLine() string { return "git " + strings.Join(r.Args, " ") }

// git runs git with an argument list (never a shell) in dir. Repositories owned by another
// user (the agent user's worktrees, a checkout of the operator's) are trusted for this
// command only, through the command line's safe.directory.
func git(ctx context.Context, dir string, args ...string) (*gitResult, error) {
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	full := append([]string{"-c", "safe.directory=*"}, args...)
	cmd := exec.CommandContext(ctx, "git", full...)
	cmd.Dir = dir
	cmd.Env = gitEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := &gitResult{Args: args, Stdout: stdout.String(), Stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		res.ExitCode = exit.ExitCode()
		msg := strings.TrimSpace(res.Stderr)
		if msg == "" {
			msg = exit.Error()
		}
		return res, fmt.Errorf("%s: %s", res.commandLine(), msg)
	case err != nil:
		res.ExitCode = -1
		return res, fmt.Errorf("error running %s: %w", res.commandLine(), err)
	}
	return res, nil
}

// gitEnv is git's environment: PATH, HOME and locale only, with prompts off (no terminal
// to ask for credentials) and no system or global config that could run hooks or helpers
// the workspace did not ask for beyond the repository's own.
func gitEnv() []string {
	return append(minimalEnv(), "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1")
}

// repoLocks serialises git operations on one repository (worktree add and remove write its
// shared metadata).
type repoLocks struct{ m sync.Map }

func (l *repoLocks) lock(repo string) func() {
	v, _ := l.m.LoadOrStore(filepath.Clean(repo), &sync.Mutex{})
	mu := v.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// repoRoot returns the top of the git work tree holding dir; an error when dir is not in one.
func repoRoot(ctx context.Context, dir string) (string, error) {
	res, err := git(ctx, dir, "rev-parse", "--show-toplevel")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(res.Stdout), nil
}

var (
	branchUnsafe = regexp.MustCompile(`[^A-Za-z0-9._/-]+`)
	branchDashes = regexp.MustCompile(`-{2,}`)
	branchSlash  = regexp.MustCompile(`/{2,}`)
)

// branchMaxLen bounds a generated branch name.
const branchMaxLen = 100

// sanitizeBranch turns a rendered template into a branch name git accepts: characters
// other than letters, digits, '.', '_', '/' and '-' become '-', and no component starts
// with '.' or '-' or ends with ".lock"; "" when nothing is left.
func sanitizeBranch(s string) string {
	s = branchUnsafe.ReplaceAllString(strings.TrimSpace(s), "-")
	s = strings.ReplaceAll(s, "..", "-")
	s = branchSlash.ReplaceAllString(s, "/")
	s = branchDashes.ReplaceAllString(s, "-")
	if len(s) > branchMaxLen {
		s = s[:branchMaxLen]
	}
	parts := strings.Split(s, "/")
	kept := parts[:0]
	for _, p := range parts {
		p = strings.TrimLeft(p, ".-")
		p = strings.TrimSuffix(p, ".lock")
		p = strings.TrimRight(p, ".-")
		if p != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, "/")
}

// slugify is the lowercase, hyphenated form of a title for branch names.
func slugify(s string) string {
	s = strings.ToLower(s)
	s = regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(s, "-")
	s = strings.Trim(s, "-")
	if len(s) > 40 {
		s = strings.TrimRight(s[:40], "-")
	}
	return s
}

// safeRef reports whether a ref given in config can go on git's command line as a
// revision: not an option, no whitespace or control characters.
func safeRef(ref string) bool {
	if ref == "" || strings.HasPrefix(ref, "-") || len(ref) > 255 {
		return false
	}
	for _, r := range ref {
		if r <= ' ' || r == 0x7f {
			return false
		}
	}
	return true
}

// gitState is what close readiness reads from a workspace's git working tree.
type gitState struct {
	RepoRoot             string  `json:"repoRoot"`
	WorkspacePath        string  `json:"workspacePath"`
	BranchName           *string `json:"branchName"`
	BaseRef              *string `json:"baseRef"`
	HasDirtyTrackedFiles bool    `json:"hasDirtyTrackedFiles"`
	HasUntrackedFiles    bool    `json:"hasUntrackedFiles"`
	DirtyEntryCount      int     `json:"dirtyEntryCount"`
	UntrackedEntryCount  int     `json:"untrackedEntryCount"`
	// AheadCount is the commits of HEAD that are on no remote branch and not in the base.
	AheadCount int `json:"aheadCount"`
	// BehindCount is the base's commits HEAD does not have.
	BehindCount      int  `json:"behindCount"`
	IsMergedIntoBase bool `json:"isMergedIntoBase"`
	CreatedByRuntime bool `json:"createdByRuntime"`
}

// readGitState reads the working tree at dir: dirty and untracked entries, and the
// commits not pushed anywhere nor merged into base.
func readGitState(ctx context.Context, dir, base string) (*gitState, error) {
	st := &gitState{WorkspacePath: dir}
	root, err := repoRoot(ctx, dir)
	if err != nil {
		return nil, err
	}
	st.RepoRoot = root
	status, err := git(ctx, dir, "status", "--porcelain=v1", "--untracked-files=all")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(status.Stdout, "\n") {
		switch {
		case line == "":
		case strings.HasPrefix(line, "??"):
			st.UntrackedEntryCount++
		default:
			st.DirtyEntryCount++
		}
	}
	st.HasDirtyTrackedFiles, st.HasUntrackedFiles = st.DirtyEntryCount > 0, st.UntrackedEntryCount > 0
	if b, err := git(ctx, dir, "rev-parse", "--abbrev-ref", "HEAD"); err == nil {
		name := strings.TrimSpace(b.Stdout)
		st.BranchName = &name
	}
	args := []string{"rev-list", "--count", "HEAD", "--not", "--remotes"}
	if base != "" && safeRef(base) {
		st.BaseRef = &base
		args = append(args, base)
	}
	if res, err := git(ctx, dir, args...); err == nil {
		st.AheadCount, _ = strconv.Atoi(strings.TrimSpace(res.Stdout))
	} else {
		return nil, err
	}
	if base != "" && safeRef(base) {
		if res, err := git(ctx, dir, "rev-list", "--count", "HEAD.."+base); err == nil {
			st.BehindCount, _ = strconv.Atoi(strings.TrimSpace(res.Stdout))
		}
		_, err := git(ctx, dir, "merge-base", "--is-ancestor", "HEAD", base)
		st.IsMergedIntoBase = err == nil
	}
	return st, nil
}
