package e2e

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// TestBenchIngest runs `sluice-bench ingest` small: every file must become a document, and the
// report must carry both measurements (engine and direct), in seconds and in CPU time.
func TestBenchIngest(t *testing.T) {
	bench := filepath.Join(packageTemp, "sluice-bench")
	if out, err := exec.Command("go", "build", "-o", bench, "../../cmd/sluice-bench").CombinedOutput(); err != nil {
		t.Fatalf("build sluice-bench: %v\n%s", err, out)
	}
	const n = 50
	out, err := exec.CommandContext(t.Context(), bench, "ingest", "--files", strconv.Itoa(n)).Output()
	if err != nil {
		t.Fatalf("bench ingest: %v\n%s", err, out)
	}
	var r struct {
		Files, Documents, Errors int
		Seconds                  float64 `json:"seconds"`
		DirectSeconds            float64 `json:"direct_seconds"`
		CPUSeconds               float64 `json:"cpu_seconds"`
		DirectCPUSeconds         float64 `json:"direct_cpu_seconds"`
		PeakRSSMB                float64 `json:"peak_rss_mb"`
		Tasks                    int     `json:"tasks"`
		LeasedTasks              int     `json:"leased_tasks"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("bench ingest output %q: %v", out, err)
	}
	if r.Files != n || r.Documents != n || r.Errors != 0 {
		t.Errorf("files %d, documents %d, errors %d; want %d, %d, 0", r.Files, r.Documents, r.Errors, n, n)
	}
	// Per entry: detect runs inline (unpack recorded its type), text is leased, and the PDF
	// child's detect, final and ingest and the entry's ingest run inline. Plus the zip's detect
	// (it has no type yet), unpack and ingest.
	if r.LeasedTasks != n+2 || r.Tasks != 6*n+3 {
		t.Errorf("tasks %d, leased %d; want %d and %d (one leased task per entry, and the zip's detect and unpack)", r.Tasks, r.LeasedTasks, 6*n+3, n+2)
	}
	if r.Seconds <= 0 || r.DirectSeconds <= 0 || r.CPUSeconds <= 0 || r.DirectCPUSeconds <= 0 || r.PeakRSSMB <= 0 {
		t.Errorf("missing measurements: %s", out)
	}
}
