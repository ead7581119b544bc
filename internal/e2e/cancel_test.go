package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/poll"
)

// cancelJobShow is what the test reads of `sluice job show --output json`.
type cancelJobShow struct {
	Job struct {
		State    string  `json:"state"`
		Error    string  `json:"error"`
		Progress float64 `json:"progress"`
	} `json:"job"`
	Items []struct {
		Name  string `json:"name"`
		State string `json:"state"`
		Error string `json:"error"`
		Tasks []struct {
			Step  string `json:"step"`
			State string `json:"state"`
		} `json:"tasks"`
		Attempts []struct {
			Step    string `json:"step"`
			Attempt int    `json:"attempt"`
			State   string `json:"state"`
			Error   string `json:"error"`
		} `json:"attempts"`
	} `json:"items"`
}

// cancelEntry is an entry of `sluice documents list --output json`.
type cancelEntry struct {
	Kind    string `json:"kind"`
	Title   string `json:"title"`
	Message string `json:"message"`
}

// TestCancelThroughTheBinary is issue #33 as a user meets it: `sluice run` of a documents-shaped
// workflow (a converting step, then ingest) over a folder of six files, two converted at once and
// four held in the converting step by a gate file, is canceled by `sluice job cancel` from a
// second process while two slow files convert. The first process ends, its drain over before
// the slow steps, saying canceled at less than 100 %; `job show` and
// `documents list` account for every file — the two converted ones as documents, the four others
// as errors `canceled` — and no item is left written. `sluice job retry --follow`, the gate open,
// converts exactly the four canceled files: six documents, no current error, the converted files
// not run again, and the attempts the cancel ended still in the history.
func TestCancelThroughTheBinary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data, gate, runs := filepath.Join(dir, "data"), filepath.Join(dir, "gate"), filepath.Join(dir, "runs")
	started := filepath.Join(dir, "started")
	if err := os.Mkdir(started, 0o755); err != nil {
		t.Fatal(err)
	}
	// Each run of convert appends its file's name to runs; a slow file's run marks itself started
	// and waits for the gate (a shell loop: the test itself never sleeps).
	script := `echo "${1##*/}" >> ` + runs + `; case "$1" in */slow-*) touch ` + started + `/"${1##*/}"; while [ ! -e ` + gate + ` ]; do sleep 0.05; done;; esac; cat`
	wf := filepath.Join(dir, "convert.yaml")
	// Two slots: the two fast files (the first two) convert, two slow ones hold the slots and the
	// last two wait, ready, behind them.
	src := fmt.Sprintf(`name: convert
steps:
  convert: {action: exec, needs: [start], concurrency: 2, with: {command: [sh, -c, %q, sh, "{{.Item.Name}}"], stdout: text}}
  ingest:  {action: ingest, needs: [children.done]}
`, script)
	if err := os.WriteFile(wf, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	inputs := filepath.Join(dir, "inputs")
	if err := os.Mkdir(inputs, 0o755); err != nil {
		t.Fatal(err)
	}
	files := []string{"fast-0", "fast-1", "slow-2", "slow-3", "slow-4", "slow-5"}
	for _, name := range files {
		if err := os.WriteFile(filepath.Join(inputs, name), []byte("the text of "+name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sluice := func(wantOK bool, args ...string) string {
		t.Helper()
		out, err := runSluice(t.Context(), append(args, "--data", data)...).Output()
		if (err == nil) != wantOK {
			stderr := ""
			if ee, ok := err.(interface{ Stderr() []byte }); ok {
				stderr = string(ee.Stderr())
			}
			t.Fatalf("sluice %s: error %v, want ok=%v\n%s%s", strings.Join(args, " "), err, wantOK, out, stderr)
		}
		return string(out)
	}
	show := func() cancelJobShow {
		t.Helper()
		var s cancelJobShow
		if err := json.Unmarshal([]byte(sluice(true, "job", "show", "--output", "json", "1")), &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	entries := func() []cancelEntry {
		t.Helper()
		var es []cancelEntry
		if err := json.Unmarshal([]byte(sluice(true, "documents", "list", "--job", "1", "--output", "json")), &es); err != nil {
			t.Fatal(err)
		}
		return es
	}

	// A drain of 1s stands for a step longer than the drain (an OCR of minutes, the default drain
	// of 30s): the process stops before the slow steps end.
	run := runSluice(t.Context(), "run", "--data", data, "--drain", "1s", wf, inputs)
	out := &poll.Buffer{}
	run.Stdout, run.Stderr = out, out
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- run.Wait() }()
	t.Cleanup(func() { _ = syscall.Kill(-run.Process.Pid, syscall.SIGKILL); <-exited })

	poll.Until(t, 60*time.Second, "two files converted and two slow ones in the converting step", func() (bool, string) {
		kids, _ := os.ReadDir(started)
		if len(kids) < 2 {
			return false, fmt.Sprintf("%d slow files started; sluice run:\n%s", len(kids), out.String())
		}
		s := show()
		ingested := 0
		for _, it := range s.Items {
			if it.State == "ingested" {
				ingested++
			}
		}
		return ingested == 2, fmt.Sprintf("%+v", s.Items)
	})
	if got := sluice(true, "job", "cancel", "1"); !strings.Contains(got, "job 1 canceled") {
		t.Errorf("job cancel said %q", got)
	}
	// The running process sees the job canceled and stops; its two slow steps outlast its drain,
	// so it cancels them and gives their tasks back as it exits.
	var runErr error
	select {
	case runErr = <-exited:
		exited <- runErr // for the cleanup
	case <-time.After(60 * time.Second):
		t.Fatalf("sluice run still running a minute after the cancel:\n%s", out.String())
	}
	log := out.String()
	if runErr == nil || !strings.Contains(log, "job 1 canceled") {
		t.Errorf("sluice run exited with %v; want an error saying job 1 canceled:\n%s", runErr, log)
	}
	// Its last progress line shows the job canceled, at what it really did.
	lines := regexp.MustCompile(`(\d+\.\d)% (\w+):`).FindAllStringSubmatch(log, -1)
	if len(lines) == 0 {
		t.Fatalf("sluice run printed no progress line:\n%s", log)
	}
	last := lines[len(lines)-1]
	if pct, _ := strconv.ParseFloat(last[1], 64); last[2] != "canceled" || pct >= 100 || pct <= 0 {
		t.Errorf("sluice run's last progress line says %s%% %s; want canceled below 100%%:\n%s", last[1], last[2], log)
	}

	s := show()
	if s.Job.State != "canceled" || s.Job.Progress >= 1 || s.Job.Progress <= 0 {
		t.Errorf("job show after the cancel: %s at %.3f; want canceled below 1", s.Job.State, s.Job.Progress)
	}
	for _, it := range s.Items {
		wantErr := ""
		if strings.HasPrefix(filepath.Base(it.Name), "slow") {
			wantErr = "canceled"
		}
		if it.State == "written" || it.Error != wantErr {
			t.Errorf("item %s after the cancel: %s, error %q; want settled with error %q (tasks %+v)", it.Name, it.State, it.Error, wantErr, it.Tasks)
		}
	}
	got := map[string]string{}
	for _, e := range entries() {
		got[filepath.Base(e.Title)] = e.Kind + " " + e.Message
	}
	want := map[string]string{"fast-0": "document ", "fast-1": "document ",
		"slow-2": "error canceled", "slow-3": "error canceled", "slow-4": "error canceled", "slow-5": "error canceled"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("documents list after the cancel:\n got %v\nwant %v", got, want)
	}

	before := countRuns(t, runs)
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if before["fast-0"] != 1 || before["fast-1"] != 1 || before["slow-2"]+before["slow-3"]+before["slow-4"]+before["slow-5"] < 2 {
		t.Errorf("runs before the retry: %v; want each fast file once and two slow files started", before)
	}
	if got := sluice(true, "job", "retry", "--follow", "1"); !strings.Contains(got, "job 1 retried") {
		t.Errorf("job retry --follow said %q", got)
	}
	s = show()
	if s.Job.State != "complete" || s.Job.Progress != 1 {
		t.Errorf("job show after the retry: %s at %.3f; want complete at 1", s.Job.State, s.Job.Progress)
	}
	canceledAttempts := 0
	for _, it := range s.Items {
		if it.State != "ingested" || it.Error != "" {
			t.Errorf("item %s after the retry: %s, error %q; want ingested without an error", it.Name, it.State, it.Error)
		}
		for _, a := range it.Attempts {
			if a.State == "canceled" {
				canceledAttempts++
				if a.Step != "convert" || !strings.HasPrefix(filepath.Base(it.Name), "slow") {
					t.Errorf("item %s: canceled attempt %+v; only the slow files' convert was canceled", it.Name, a)
				}
			}
		}
	}
	// slow-2 and slow-3 ran when the job was canceled: their attempts are in the history.
	if canceledAttempts < 2 {
		t.Errorf("%d canceled attempts in job show's history after the retry; want those of the two running slow files: %+v", canceledAttempts, s.Items)
	}
	got = map[string]string{}
	for _, e := range entries() {
		got[filepath.Base(e.Title)] = e.Kind + " " + e.Message
	}
	want = map[string]string{}
	for _, name := range files {
		want[name] = "document "
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("documents list after the retry:\n got %v\nwant %v", got, want)
	}
	// The converted files ran once, before the cancel; each slow file once more in the retry.
	after := countRuns(t, runs)
	for _, name := range files {
		want := before[name]
		if strings.HasPrefix(name, "slow") {
			want++
		}
		if after[name] != want {
			t.Errorf("%s converted %d times in all, want %d (before the retry %v, after %v)", name, after[name], want, before, after)
		}
	}
}

// countRuns counts the lines of each name in the file runs.
func countRuns(t *testing.T, runs string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(runs)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, name := range strings.Fields(string(b)) {
		counts[name]++
	}
	return counts
}
