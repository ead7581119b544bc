package web_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluice-project/sluice/internal/web"
)

// TestProblemsBanner: while the server reports a problem (a blob store outage, as the node's
// Problems says it), every page shows it as an alert banner; once it is over, the banner goes.
func TestProblemsBanner(t *testing.T) {
	t.Parallel()
	var problem atomic.Value
	problem.Store("")
	b := setupWith(t, nil, func(c *web.Config) {
		c.Problems = func(context.Context) []string {
			if p := problem.Load().(string); p != "" {
				return []string{p}
			}
			return nil
		}
	})
	c := b.client(t)
	c.signIn(b.reader)
	const outage = "blob store unreachable since 2026-11-29T04:00:00Z (12s ago, 7 failed calls): cannot reach the S3 endpoint"
	for _, tc := range []struct {
		name, problem string
	}{{"all well", ""}, {"outage", outage}, {"over", ""}} {
		problem.Store(tc.problem)
		for _, path := range []string{"/jobs", "/workflows"} {
			res, page := c.do("GET", path, nil, nil)
			if res.StatusCode != 200 {
				t.Fatalf("%s: GET %s = %d", tc.name, path, res.StatusCode)
			}
			shown := strings.Contains(page, `<p class="outage" role="alert">`+outage+`</p>`)
			if shown != (tc.problem != "") || (tc.problem == "" && strings.Contains(page, `class="outage"`)) {
				t.Errorf("%s: GET %s shows the banner = %v", tc.name, path, shown)
			}
		}
	}
}
