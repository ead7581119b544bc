package web_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestVersionChanges stores three versions of a workflow and reads what each changed: the
// workflow's page shows the line diff from the version before (removed and added lines, with
// their numbers, escaped), the library counts the lines per version, and the fragment the
// editor shows after saving says when there is nothing to compare with.
func TestVersionChanges(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	v1 := "# tidy <b>files</b>\nname: tidy\nsteps:\n  detect:\n    action: detect\n    needs: [start]\n"
	v2 := "# tidy <b>files</b>\nname: tidy\nsteps:\n  detect:\n    action: detect\n    needs: [start]\n    attempts: 2\n  hash:\n    action: exec\n    needs: [start]\n    with: {command: [sha256sum]}\n"
	v3 := strings.Replace(v2, "attempts: 2", "attempts: 5", 1)
	for _, src := range []string{v1, v2, v3} {
		if _, _, err := b.n.Engine.ApplyWorkflow(ctx, []byte(src), "tidy.yaml"); err != nil {
			t.Fatal(err)
		}
	}
	c := b.client(t)
	csrf := c.signIn(b.reader)

	res, page := c.do("GET", "/workflows/tidy?version=3", nil, nil)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /workflows/tidy?version=3: %s", res.Status)
	}
	rows := diffRows(page)
	want := []string{
		"eq 6 6 needs: [start]",
		"del 7 attempts: 2",
		"ins 7 attempts: 5",
		"eq 8 8 hash:",
	}
	for _, w := range want {
		if !strings.Contains(strings.Join(rows, "\n"), w) {
			t.Errorf("the changes of v3 lack the row %q; rows:\n%s", w, strings.Join(rows, "\n"))
		}
	}
	if !strings.Contains(page, "Changes from v2 to v3") || !strings.Contains(page, "1 line added, 1 removed.") {
		t.Errorf("v3's page does not sum up its changes:\n%s", page)
	}
	// Three lines of context around the one change (line 7 of 11): 3 lines left out above, 1 below.
	if len(rows) != 8 || !strings.Contains(page, "3 unchanged lines") || !strings.Contains(page, "1 unchanged line<") {
		t.Errorf("%d rows (want 8: 3 above, 2 changed, 3 below) or no note of the lines left out:\n%s", len(rows), strings.Join(rows, "\n"))
	}

	_, page = c.do("GET", "/workflows/tidy?version=2", nil, nil)
	if rows := diffRows(page); len(rows) != 8 || !strings.Contains(page, "5 lines added, 0 removed.") {
		t.Errorf("v2's changes: %d rows:\n%s", len(rows), strings.Join(rows, "\n"))
	}
	_, page = c.do("GET", "/workflows/tidy?version=1", nil, nil)
	if !strings.Contains(page, "&lt;b&gt;files&lt;/b&gt;") || strings.Contains(page, "<b>files") {
		t.Error("the source is not escaped")
	}
	if !strings.Contains(page, "first version of tidy") || len(diffRows(page)) != 0 {
		t.Error("v1's page does not say it is the first version")
	}

	_, page = c.do("GET", "/workflows", nil, nil)
	for _, w := range []string{"+1</span> <span class=\"minus\">−1", "+5</span> <span class=\"minus\">−0", "changes of v3 since v2: lines added 1, removed 1", "first version"} {
		if !strings.Contains(page, w) {
			t.Errorf("the library lacks %q", w)
		}
	}

	res, page = c.do("GET", "/workflows/tidy/changes?version=3", nil, nil)
	if res.StatusCode != http.StatusOK || strings.Contains(page, "<html") || len(diffRows(page)) != 8 {
		t.Errorf("the changes fragment: %s, %d rows, whole page %v", res.Status, len(diffRows(page)), strings.Contains(page, "<html"))
	}
	if res, _ := c.do("GET", "/workflows/tidy/changes?version=9", nil, nil); res.StatusCode != http.StatusNotFound {
		t.Errorf("changes of a version that does not exist: %s, want 404", res.Status)
	}

	// The editor's draft comes with what saving it would change from v3.
	for _, tc := range []struct {
		name, src, want string
		rows            int
	}{
		{"a line changed", strings.Replace(v3, "attempts: 5", "attempts: 6", 1), "Changes to save, from v3", 8},
		{"the same YAML", v3, "The draft has the same YAML as v3.", 0},
		{"a new name", strings.Replace(v3, "name: tidy", "name: fresh", 1), "", 0},
	} {
		body, _ := json.Marshal(map[string]string{"yaml": tc.src})
		req, _ := http.NewRequestWithContext(ctx, "POST", b.url+"/ui/draft", bytes.NewReader(body))
		req.Header.Set("X-CSRF-Token", csrf)
		res, err := c.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Changes string `json:"changes"`
		}
		err = json.NewDecoder(res.Body).Decode(&out)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if tc.want == "" && out.Changes != "" || !strings.Contains(out.Changes, tc.want) || len(diffRows(out.Changes)) != tc.rows {
			t.Errorf("%s: the draft's changes (%d rows, want %d, and %q):\n%s", tc.name, len(diffRows(out.Changes)), tc.rows, tc.want, out.Changes)
		}
	}
}

var (
	rowRE  = regexp.MustCompile(`(?s)<tr class="(eq|ins|del)">(.*?)</tr>`)
	cellRE = regexp.MustCompile(`(?s)<td class="(?:ln|text)">(.*?)</td>`)
	tagRE  = regexp.MustCompile(`<[^>]+>`)
)

// diffRows returns a page's diff rows as "CLASS OLD NEW TEXT" (numbers left out when empty).
func diffRows(page string) []string {
	var out []string
	for _, m := range rowRE.FindAllStringSubmatch(page, -1) {
		f := []string{m[1]}
		for _, c := range cellRE.FindAllStringSubmatch(m[2], -1) {
			if v := strings.TrimSpace(tagRE.ReplaceAllString(c[1], "")); v != "" {
				f = append(f, v)
			}
		}
		out = append(out, strings.Join(f, " "))
	}
	return out
}
