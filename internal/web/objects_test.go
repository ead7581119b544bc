package web_test

import (
	"fmt"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/builtin"
	"github.com/sluice-project/sluice/internal/objects"
	"github.com/sluice-project/sluice/internal/poll"
)

// objectsSheets uploads two ingest sheets: one with bad rows (row_fail), and one of two
// supplemental files approved and run to completed. It returns their ids.
func objectsSheets(t *testing.T, b *bundle) (bad, good int64) {
	t.Helper()
	ctx := t.Context()
	if err := builtin.Apply(ctx, b.n.Engine, objects.Name); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range []string{"a.txt", "b.txt"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("supplement "+f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	head := strings.Join(objects.Headers, ",") + "\n"
	upload := func(name, rows string) int64 {
		id, err := objects.Upload(ctx, b.n.Engine, b.n.Blobs, objects.UploadParams{Name: name, CSV: strings.NewReader(head + rows), FilesDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	wait := func(id int64, statuses ...string) {
		poll.Until(t, time.Minute, fmt.Sprintf("sheet %d to be %v", id, statuses), func() (bool, string) {
			s, err := objects.Open(b.n.Engine).GetSheet(ctx, id)
			return err == nil && strings.Contains(strings.Join(statuses, " "), s.Status), fmt.Sprint(s, err)
		})
	}
	bad = upload("bad.csv", "IMAGE,w-bad,f-bad-1,a.txt,one,S,one,,\nIMAGE,w-bad,f-bad-2,plate 2.txt,two,P,two,true,\n")
	good = upload("good.csv", "IMAGE,w-good,f-good-1,a.txt,one,S,one,,\nIMAGE,w-good,f-good-2,b.txt,two,S,two,,\n")
	wait(bad, objects.StatusRowFail)
	wait(good, objects.StatusAwaitingApproval)
	if err := objects.Approve(ctx, b.n.Engine, good); err != nil {
		t.Fatal(err)
	}
	wait(good, objects.StatusCompleted)
	return bad, good
}

// TestObjectsPages: a sheet's page lists its row errors with Meadow's row numbers and words, a
// job of the objects workflow links its sheet, and a work's and a file set's pages show each
// action's state and the timeline of its history in order.
func TestObjectsPages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bad, good := objectsSheets(t, b)
	c := b.client(t)
	c.signIn(b.reader)
	get := func(path string) string {
		t.Helper()
		resp, page := c.do("GET", path, nil, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s = %d: %s", path, resp.StatusCode, page)
		}
		return html.UnescapeString(page)
	}
	page := get(fmt.Sprintf("/sheets/%d", bad))
	for _, want := range []string{
		`<td data-label="Row">2</td><td data-label="Field">filename</td><td data-label="Message" class="reason">filename: plate 2.txt contains characters that are not safe for S3 object keys:  </td>`,
		`<td data-label="Row">2</td><td data-label="Field">work_image</td><td data-label="Message" class="reason">work_image: role P cannot be a work image</td>`,
		"row_fail",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the bad sheet's page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, `data-label="Row">1<`) {
		t.Errorf("the bad sheet's page shows an error on row 1, which is good")
	}
	if p := get(fmt.Sprintf("/jobs/%d", good)); !strings.Contains(p, fmt.Sprintf(`href="/sheets/%d"`, good)) {
		t.Errorf("the job page does not link its sheet")
	}
	if p := get(fmt.Sprintf("/sheets/%d", good)); !strings.Contains(p, `href="/objects/w-good"`) || !strings.Contains(p, "2 of 2 file sets complete") {
		t.Errorf("the good sheet's page:\n%s", p)
	}
	page = get("/objects/w-good")
	if !strings.Contains(page, "File set f-good-1") || !strings.Contains(page, "File set f-good-2") {
		t.Fatalf("the work's page lacks its file sets:\n%s", page)
	}
	page = get("/objects/f-good-2")
	if !strings.Contains(page, "<dt>PRONOM</dt><dd>x-fmt/111</dd>") {
		t.Errorf("the file set's page does not show its PRONOM identifier")
	}
	tl := regexp.MustCompile(`(?s)<ol class="action-history">(.*?)</ol>`).FindStringSubmatch(page)
	if tl == nil {
		t.Fatalf("no timeline on the file set's page:\n%s", page)
	}
	var got []string
	for _, m := range regexp.MustCompile(`<strong>(\w+)</strong> <span class="state state-\w+">([\w/]+)</span>`).FindAllStringSubmatch(tl[1], -1) {
		if m[1] == "CopyFileToPreservation" {
			got = append(got, m[2])
		}
	}
	if strings.Join(got, " ") != "waiting started ok" {
		t.Errorf("CopyFileToPreservation on the timeline: %v, want waiting started ok\n%s", got, tl[1])
	}
	if resp, _ := c.do("GET", "/objects/nothing", nil, nil); resp.StatusCode != 404 {
		t.Errorf("an unknown object's page = %d, want 404", resp.StatusCode)
	}
}

// TestObjectsPagesA11y runs axe-core on the sheet, work and file set pages in Chromium.
func TestObjectsPagesA11y(t *testing.T) {
	tools := requireTools(t, "chromium")
	b := setup(t)
	bad, good := objectsSheets(t, b)
	tb := &tab{t: t, ctx: browser(t, tools["chromium"]), base: b.url, shot: screenshotDir(t), axe: axeScript(t)}
	tb.open("/signin")
	tb.waitJS(10*time.Second, "the sign-in page", `document.readyState === "complete" && document.querySelector("#token") !== null`, `location.href`)
	tb.signIn(b.admin)
	for _, p := range []struct{ path, name string }{
		{fmt.Sprintf("/sheets/%d", bad), "sheet with row errors"},
		{fmt.Sprintf("/sheets/%d", good), "completed sheet"},
		{"/objects/w-good", "work"},
		{"/objects/f-good-1", "file set"},
	} {
		tb.open(p.path)
		tb.waitJS(10*time.Second, "the "+p.name+" page", `document.readyState === "complete" && document.querySelector("h1") !== null`, `location.href`)
		tb.screenshot("objects-" + strings.ReplaceAll(p.name, " ", "-"))
		tb.checkA11y(p.name)
	}
}
