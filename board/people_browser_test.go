package board_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/keelhq/keel/sdktest"
)

// TestBrowserFolderDrag drives Debian's headless Chromium on the folders page of a
// local_trusted host: an item dragged onto a folder (HTML5 drag events, as a mouse drag
// fires them) is filed there by folders.js submitting the item's "move to" form through
// htmx, the tree re-renders in place, and no CSP violation or script error is logged. Like
// TestBrowserLiveComment it runs only with KEEL_BROWSER_TESTS=1.
func TestBrowserFolderDrag(t *testing.T) {
	if os.Getenv("KEEL_BROWSER_TESTS") == "" {
		t.Skip("browser tests run with KEEL_BROWSER_TESTS=1 (they need Debian's chromium; a loaded machine makes them slow)")
	}
	exe, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed: the browser test needs Debian's headless Chromium (apt-get install -y chromium)")
	}
	h, co := startLocal(t)
	res := h.Do("POST", "/api/companies/"+co+"/skills", map[string]any{"name": "Dragged skill"})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	item := res.Map(t)["id"].(string)
	res = h.Do("POST", "/api/companies/"+co+"/folders", map[string]any{"kind": "skill", "name": "Target"})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	target := res.Map(t)["id"].(string)

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.Flag("headless", "new"), chromedp.WindowSize(1280, 800))...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	defer cancelTimeout()
	var mu sync.Mutex
	var violations []string
	// Start the browser before listening to its console: a listener racing the first
	// navigation for the new tab left it at about:blank.
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)), "starting chromium")
	go func() {
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			if strings.Contains(m.Text, "Content Security Policy") || m.Type == chromedp.ConsoleException {
				mu.Lock()
				violations = append(violations, m.Text)
				mu.Unlock()
			}
		}
	}()

	itemSel := `li.folder-item[data-item-id="` + item + `"]`
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(h.URL+"/c/"+co+"/folders?kind=skill"),
		chromedp.WaitVisible(chromedp.CSS(itemSel)),
	))
	// The drag a mouse makes: dragstart on the item, dragover and drop on the folder.
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`(function(){
		var item=document.querySelector('`+itemSel+`');
		var zone=document.querySelector('section.folder-drop[data-folder-id="`+target+`"]');
		var dt=new DataTransfer();
		item.dispatchEvent(new DragEvent('dragstart',{bubbles:true,cancelable:true,dataTransfer:dt}));
		zone.dispatchEvent(new DragEvent('dragover',{bubbles:true,cancelable:true,dataTransfer:dt}));
		zone.dispatchEvent(new DragEvent('drop',{bubbles:true,cancelable:true,dataTransfer:dt}));
		item.dispatchEvent(new DragEvent('dragend',{bubbles:true,cancelable:true,dataTransfer:dt}));
		return true})()`))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.CSS(`#folder-`+target+` `+itemSel)),
	))
	sdktest.WaitFor(t, time.Minute, func() bool {
		f, _ := h.Do("GET", "/api/companies/"+co+"/skills/"+item, nil).Map(t)["folderId"].(string)
		return f == target
	}, "the dragged skill to be filed in the target folder")
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, violations, "the browser logged CSP violations or script errors")
}
