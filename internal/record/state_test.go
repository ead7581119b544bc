package record_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/record"
)

// TestStatesWireForm: a state's text is what the database, the API and the CLI hold; a typed
// state marshals to exactly that text.
func TestStatesWireForm(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		got  []string
		want string
	}{
		{"job", texts(record.JobStates()), "running complete failed canceled"},
		{"task", texts(record.TaskStates()), "blocked ready running parked complete failed skipped canceled"},
		{"item", texts(record.ItemStates()), "created written processed ingested"},
	} {
		if got := strings.Join(tc.got, " "); got != tc.want {
			t.Errorf("%s states = %q, want %q", tc.name, got, tc.want)
		}
	}
	b, err := json.Marshal(struct {
		Job   record.JobState
		Items map[record.ItemState]int
	}{record.JobCanceled, map[record.ItemState]int{record.ItemWritten: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"Job":"canceled","Items":{"written":2}}`; string(b) != want {
		t.Errorf("json = %s, want %s", b, want)
	}
}

func texts[S ~string](ss []S) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

// TestStatesListCopies: the lists are the caller's to change.
func TestStatesListCopies(t *testing.T) {
	t.Parallel()
	l := record.TaskStates()
	l[0] = "x"
	if record.TaskStates()[0] != record.TaskBlocked {
		t.Error("changing TaskStates' result changed the next one")
	}
}

func TestActive(t *testing.T) {
	t.Parallel()
	var active []string
	for _, s := range record.TaskStates() {
		if s.Active() {
			active = append(active, string(s))
		}
	}
	if got := strings.Join(active, " "); got != "ready running parked" {
		t.Errorf("active task states = %s, want ready running parked", got)
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	for _, s := range record.JobStates() {
		if got, err := record.ParseJobState(string(s)); err != nil || got != s {
			t.Errorf("ParseJobState(%q) = %q, %v", s, got, err)
		}
	}
	for _, s := range record.TaskStates() {
		if got, err := record.ParseTaskState(string(s)); err != nil || got != s {
			t.Errorf("ParseTaskState(%q) = %q, %v", s, got, err)
		}
	}
	for _, s := range record.ItemStates() {
		if got, err := record.ParseItemState(string(s)); err != nil || got != s {
			t.Errorf("ParseItemState(%q) = %q, %v", s, got, err)
		}
	}
	for _, tc := range []struct {
		name, text, want string
		parse            func(string) error
	}{
		{"unknown job state", "done", `"done" is not a job state: one of running, complete, failed, canceled`,
			func(s string) error { _, err := record.ParseJobState(s); return err }},
		{"task state for a job", "ready", `"ready" is not a job state: one of running, complete, failed, canceled`,
			func(s string) error { _, err := record.ParseJobState(s); return err }},
		{"case matters", "Running", `"Running" is not a task state: one of blocked, ready, running, parked, complete, failed, skipped, canceled`,
			func(s string) error { _, err := record.ParseTaskState(s); return err }},
		{"empty", "", `"" is not an item state: one of created, written, processed, ingested`,
			func(s string) error { _, err := record.ParseItemState(s); return err }},
		{"long input is cut", strings.Repeat("x", 10000), `"` + strings.Repeat("x", 40) + `…" is not a job state: one of running, complete, failed, canceled`,
			func(s string) error { _, err := record.ParseJobState(s); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.parse(tc.text)
			if err == nil || err.Error() != tc.want {
				t.Errorf("error = %v, want %s", err, tc.want)
			}
		})
	}
}
