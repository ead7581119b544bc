package web_test

import (
	"html"
	"net/http"
	"strings"
	"testing"
)

// TestMissingIDsAreNotFound: every page and fragment of a job or item that does not exist is a
// 404 saying so in plain words ("job 99 does not exist"), lists included — the tree's fragment
// of a missing job was an empty 200.
func TestMissingIDsAreNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	c.signIn(b.admin)
	for path, want := range map[string]string{
		"/jobs/99":                   "job 99 does not exist",
		"/jobs/99/items":             "job 99 does not exist",
		"/jobs/99/items?parent_id=5": "job 99 does not exist",
		"/jobs/99/documents":         "job 99 does not exist",
		"/items/99":                  "item 99 does not exist",
		"/ui/api/jobs/99/items":      "job 99 does not exist",
		"/ui/api/jobs/99/errors":     "job 99 does not exist",
		"/ui/api/items/99":           "item 99 does not exist",
		"/search?q=x&job=99":         "job 99 does not exist",
	} {
		res, page := c.do("GET", path, nil, nil)
		if res.StatusCode != http.StatusNotFound || !strings.Contains(html.UnescapeString(page), want) {
			t.Errorf("GET %s = %s, want 404 saying %q:\n%s", path, res.Status, want, page)
		}
	}
}
