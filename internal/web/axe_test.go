package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// axeScript reads axe-core's axe.min.js from $SLUICE_TEST_AXE (.ci/run installs it from npm).
// Without it the accessibility checks are left out and said so, unless
// SLUICE_TEST_REQUIRE_TOOLS=1 (CI), where the test fails.
func axeScript(t *testing.T) string {
	t.Helper()
	axeOnce.Do(func() {
		p := os.Getenv("SLUICE_TEST_AXE")
		if p == "" {
			axeErr = fmt.Errorf("SLUICE_TEST_AXE is not set (npm install --prefix DIR axe-core@4.14.1; SLUICE_TEST_AXE=DIR/node_modules/axe-core/axe.min.js)")
			return
		}
		b, err := os.ReadFile(p)
		if err != nil {
			axeErr = fmt.Errorf("SLUICE_TEST_AXE: %w", err)
			return
		}
		axeSrc = string(b)
	})
	if axeErr != nil {
		if os.Getenv("SLUICE_TEST_REQUIRE_TOOLS") == "1" {
			t.Fatalf("axe-core missing (SLUICE_TEST_REQUIRE_TOOLS=1): %v", axeErr)
		}
		t.Logf("accessibility checks left out: %v (set SLUICE_TEST_REQUIRE_TOOLS=1 to fail instead)", axeErr)
	}
	return axeSrc
}

var (
	axeOnce sync.Once
	axeSrc  string
	axeErr  error
)

// axeViolation is one rule axe-core found broken, with the elements that break it.
type axeViolation struct {
	ID      string `json:"id"`
	Impact  string `json:"impact"`
	Help    string `json:"help"`
	HelpURL string `json:"helpUrl"`
	Nodes   []struct {
		Target         []any  `json:"target"`
		HTML           string `json:"html"`
		FailureSummary string `json:"failureSummary"`
	} `json:"nodes"`
}

// checkA11y runs axe-core on the page the tab shows and fails the test on any violation, of
// any impact, listing each rule with its impact and the elements that break it; what axe-core
// cannot decide (say, the PDF's frame) is logged for a person to review. page names the page in
// the message. With no axe-core (see axeScript) it does nothing.
func (tb *tab) checkA11y(page string) {
	tb.t.Helper()
	if tb.axe == "" {
		return
	}
	ctx, cancel := context.WithTimeout(tb.ctx, 60*time.Second)
	defer cancel()
	// The page's Content-Security-Policy does not apply to the DevTools protocol's evaluation,
	// so axe-core is injected as it is, with the page's own policy unchanged.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](`if (!window.axe) { `+tb.axe+"\n}")); err != nil {
		tb.t.Fatalf("inject axe-core on the %s page: %v", page, err)
	}
	// Every rule axe-core has, those off by default included: AAA contrast (7:1), link
	// purpose from the link alone, target size, and the experimental ones.
	out, err := chromedp.Run(ctx, chromedp.Evaluate[string](`axe.run(document, {rules: Object.fromEntries(axe.getRules().map((r) => [r.ruleId, {enabled: true}]))}).then((r) => JSON.stringify({
		violations: r.violations, passes: r.passes.length, incomplete: r.incomplete.map((i) => i.id + " (" + i.nodes.length + ")")}))`, chromedp.EvalAwaitPromise))
	if err != nil {
		tb.t.Fatalf("run axe-core on the %s page: %v", page, err)
	}
	var res struct {
		Violations []axeViolation `json:"violations"`
		Passes     int            `json:"passes"`
		Incomplete []string       `json:"incomplete"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		tb.t.Fatalf("axe-core's result on the %s page: %v", page, err)
	}
	vs := res.Violations
	tb.t.Logf("axe-core on the %s page: %d rules pass, %d broken; for a person to review: %v", page, res.Passes, len(vs), res.Incomplete)
	if len(vs) == 0 {
		return
	}
	var b strings.Builder
	for _, v := range vs {
		fmt.Fprintf(&b, "\n  [%s] %s: %s (%s)", v.Impact, v.ID, v.Help, v.HelpURL)
		for _, n := range v.Nodes {
			fmt.Fprintf(&b, "\n      %v  %s", n.Target, n.HTML)
			for _, line := range strings.Split(n.FailureSummary, "\n") {
				if line = strings.TrimSpace(line); line != "" {
					fmt.Fprintf(&b, "\n        %s", line)
				}
			}
		}
	}
	tb.t.Errorf("axe-core: %d accessibility rule(s) broken on the %s page (%s):%s", len(vs), page, eval[string](tb, `location.pathname`), b.String())
}
