package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestJobRetry fails a job through the real binary on a missing marker file, creates the file,
// and retries it with `sluice job retry --follow`: the job completes without running its
// completed step again.
func TestJobRetry(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data, marker, count := filepath.Join(dir, "data"), filepath.Join(dir, "marker"), filepath.Join(dir, "first.count")
	wf := filepath.Join(dir, "retry.yaml")
	if err := os.WriteFile(wf, []byte(`name: retry
steps:
  first: {action: exec, needs: [start], success: [first.done], with: {command: [sh, -c, "echo run >> `+count+`"]}}
  check: {action: exec, needs: [first.done], attempts: 1, failure: [fail], with: {command: [test, -e, `+marker+`]}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	input := filepath.Join(dir, "a.txt")
	if err := os.WriteFile(input, []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	sluice := func(wantOK bool, args ...string) string {
		t.Helper()
		out, err := runSluice(t.Context(), append(args, "--data", data)...).CombinedOutput()
		if (err == nil) != wantOK {
			t.Fatalf("sluice %s: error %v, want ok=%v\n%s", strings.Join(args, " "), err, wantOK, out)
		}
		return string(out)
	}
	if out := sluice(false, "run", wf, input); !strings.Contains(out, "job 1 failed") {
		t.Fatalf("first run did not fail the job:\n%s", out)
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if out := sluice(true, "job", "retry", "--follow", "1"); !strings.Contains(out, "complete") {
		t.Errorf("retry did not complete the job:\n%s", out)
	}
	if runs, err := os.ReadFile(count); err != nil || string(runs) != "run\n" {
		t.Errorf("the completed step ran %q times (%v), want once", runs, err)
	}
	if out := sluice(false, "job", "retry", "1"); !strings.Contains(out, "job 1 has no failed or canceled tasks") {
		t.Errorf("second retry:\n%s", out)
	}
}
