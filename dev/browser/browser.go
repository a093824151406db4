// Package browser drives the console in Debian's chromium for the end-to-end suites: a tab
// per person, with the test's failures attached. It is development support, never linked
// into treasury.
package browser

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Chromium is the browser the console's tests drive: Debian's chromium package. Without it
// the test skips, loudly, only where apt-get could not have installed it either.
func Chromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if _, err := exec.LookPath("apt-get"); err == nil {
		t.Fatal("the console's browser tests need chromium: apt-get install -y chromium (.ci/run does it)")
	}
	t.Log("######## SKIPPED: no chromium and no apt-get to install it: the console was NOT tested in a browser ########")
	t.Skip("no chromium and no apt-get")
	return ""
}

// Start starts the browser at path with the flags given beside the usual ones, and returns
// a context for its first tab, and how to stop it.
func Start(t testing.TB, path string, flags ...chromedp.ExecAllocatorOption) (context.Context, func()) {
	t.Helper()
	alloc, stopBrowser := chromedp.NewExecAllocator(context.Background(), append(append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1280, 860)), flags...)...)
	ctx, closeTab := chromedp.NewContext(alloc)
	// The first action starts the browser, which lives as long as that action's context:
	// it gets no deadline.
	if err := chromedp.Do(ctx); err != nil {
		closeTab()
		stopBrowser()
		t.Fatalf("start %s: %v", path, err)
	}
	return ctx, func() { closeTab(); stopBrowser() }
}

// Tab is one browser tab of a person.
type Tab struct {
	T    testing.TB
	Ctx  context.Context
	Base string
	// Shots is the directory screenshots go to; empty takes none.
	Shots string
}

func (p *Tab) step() (context.Context, context.CancelFunc) {
	return context.WithTimeout(p.Ctx, 30*time.Second)
}

// Open loads a console page and returns its HTTP status.
func (p *Tab) Open(path string) int {
	p.T.Helper()
	ctx, cancel := p.step()
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, chromedp.Navigate(p.Base+path))
	if err != nil {
		p.T.Fatalf("open %s: %v", path, err)
	}
	return int(resp.Status)
}

// Submit runs actions that send a form, and waits for the page it leads to.
func (p *Tab) Submit(what string, actions ...chromedp.Action[chromedp.Void]) int {
	p.T.Helper()
	ctx, cancel := p.step()
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, actions...)
	if err != nil {
		p.T.Fatalf("%s: %v", what, err)
	}
	return int(resp.Status)
}

// Do runs actions on the page.
func (p *Tab) Do(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.T.Helper()
	ctx, cancel := p.step()
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.T.Fatalf("%s: %v", what, err)
	}
}

// Text is the text of the first element css selects.
func (p *Tab) Text(css string) string {
	p.T.Helper()
	ctx, cancel := p.step()
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(css)))
	if err != nil {
		p.T.Fatalf("text of %s: %v", css, err)
	}
	return strings.TrimSpace(s)
}

// Eval is a JavaScript expression's value on the tab's page.
func Eval[T any](p *Tab, expression string) T {
	p.T.Helper()
	ctx, cancel := p.step()
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expression))
	if err != nil {
		p.T.Fatalf("evaluate %s: %v", expression, err)
	}
	return v
}

// WaitFor polls a JavaScript predicate until it holds.
func (p *Tab) WaitFor(what, predicate string) {
	p.T.Helper()
	ctx, cancel := p.step()
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](predicate, chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		html, _ := chromedp.Run(p.Ctx, chromedp.Evaluate[string](`document.querySelector("main") ? document.querySelector("main").innerText : ""`))
		p.T.Fatalf("%s: %v\npage: %s", what, err, html)
	}
}

// Location is the page's address, less the base.
func (p *Tab) Location() string {
	p.T.Helper()
	return strings.TrimPrefix(Eval[string](p, `location.href`), p.Base)
}

// Screenshot saves the page as <Shots>/<name>.png when Shots names a directory.
func (p *Tab) Screenshot(name string) {
	p.T.Helper()
	if p.Shots == "" {
		return
	}
	ctx, cancel := p.step()
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.T.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(p.Shots, name+".png"), png, 0o644); err != nil {
		p.T.Fatal(err)
	}
}

// SignIn signs a person in through the sign-in page and returns where it led.
func (p *Tab) SignIn(email, password string) string {
	p.T.Helper()
	if status := p.Open("/console/"); status != http.StatusOK || !strings.HasPrefix(p.Location(), "/console/sign-in") {
		p.T.Fatalf("a stranger at /console/ is at %s (HTTP %d), not the sign-in page", p.Location(), status)
	}
	p.Screenshot("sign-in")
	p.Do("fill in the sign-in form", chromedp.SetValue(chromedp.CSS("#email"), email), chromedp.SetValue(chromedp.CSS("#password"), password))
	if status := p.Submit("sign in", chromedp.Click(chromedp.CSS(`main button[type="submit"]`))); status != http.StatusOK {
		p.T.Fatalf("sign in as %s: HTTP %d at %s", email, status, p.Location())
	}
	return p.Location()
}

// Menu is the labels of the app's pages in the side menu.
func (p *Tab) Menu() string {
	p.T.Helper()
	return Eval[string](p, `[...document.querySelectorAll("nav.pages a")].map(a => a.textContent).join(",")`)
}

// AcceptLink opens a one-time sign-in link in the tab, sets a password with it, and
// returns where that led, signed in.
func (p *Tab) AcceptLink(link, password string) string {
	p.T.Helper()
	u, err := url.Parse(link)
	if err != nil {
		p.T.Fatal(err)
	}
	if status := p.Open(u.RequestURI()); status != http.StatusOK || p.Text("h1") != "Set your password" {
		p.T.Fatalf("the sign-in link's page: HTTP %d, %q", status, p.Text("h1"))
	}
	p.Screenshot("welcome")
	p.Do("choose a password", chromedp.SetValue(chromedp.CSS("#password"), password), chromedp.SetValue(chromedp.CSS("#confirm"), password))
	if status := p.Submit("set the password", chromedp.Click(chromedp.CSS(`main button[type="submit"]`))); status != http.StatusOK {
		p.T.Fatalf("setting the password: HTTP %d at %s", status, p.Location())
	}
	return p.Location()
}
