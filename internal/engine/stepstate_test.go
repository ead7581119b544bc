package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/workflow"
)

// TestStepStates: the state derived for each step instance from the workflow, the job, the
// item's task rows and its events, in each case the rows alone do not tell.
func TestStepStates(t *testing.T) {
	t.Parallel()
	def, err := workflow.Parse([]byte(`name: w
external: [approved]
steps:
  a: {action: pass, needs: [start], success: [a-done]}
  b: {action: pass, needs: [a-done, approved], success: [b-done]}
  c: {action: pass, needs: [start], when: 'name.endsWith(".mov")'}
  d: {action: pass, needs: [children.done]}
`), "w.yaml")
	if err != nil {
		t.Fatal(err)
	}
	running := &record.Job{State: record.JobRunning}
	open := &record.Item{State: record.ItemWritten, Name: "x.mp4"}
	tasks := func(states ...string) []*record.Task {
		var out []*record.Task
		for i, s := range states {
			step, st, _ := strings.Cut(s, ":")
			out = append(out, &record.Task{ID: int64(i + 1), Step: step, State: record.TaskState(st), Attempt: 1})
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		job   *record.Job
		item  *record.Item
		tasks []*record.Task
		fired []string
		want  string
	}{
		{"just created", running, open, tasks("a:ready", "c:skipped"), []string{"start"},
			"a:ready() b:blocked(a-done+approved) c:skipped() d:blocked(children.done)"},
		{"waiting for the outside", running, open, tasks("a:complete", "c:skipped"), []string{"start", "a-done"},
			"a:complete() b:blocked(approved)! c:skipped() d:blocked(children.done)"},
		{"a retried step's latest row wins", running, open, tasks("a:failed", "c:skipped", "a:running"), []string{"start"},
			"a:running() b:blocked(a-done+approved) c:skipped() d:blocked(children.done)"},
		{"a reopened collector's blocked row", running, open, tasks("a:complete", "c:skipped", "d:blocked"), []string{"start", "a-done"},
			"a:complete() b:blocked(approved)! c:skipped() d:blocked(children.done)"},
		{"item settled: never reached", running, &record.Item{State: record.ItemProcessed}, tasks("a:failed", "c:skipped"), []string{"start"},
			"a:failed() b:skipped(a-done+approved) c:skipped() d:skipped(children.done)"},
		{"job canceled: never reached", &record.Job{State: record.JobCanceled}, open, tasks("a:canceled", "c:skipped"), []string{"start"},
			"a:canceled() b:skipped(a-done+approved) c:skipped() d:skipped(children.done)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, st := range stepStates(def, tc.job, tc.item, tc.tasks, tc.fired) {
				w := fmt.Sprintf("%s:%s(%s)", st.Step, st.State, strings.Join(st.Needs, "+"))
				if st.External {
					w += "!"
				}
				got = append(got, w)
				switch {
				case st.State == record.TaskSkipped && st.Step == "c" && st.Reason != `when: name.endsWith(".mov") did not hold`:
					t.Errorf("c's reason: %q", st.Reason)
				case st.State == record.TaskSkipped && st.Step == "b" && st.Reason != "not reached: a-done, approved never fired":
					t.Errorf("b's reason: %q", st.Reason)
				case st.State != record.TaskSkipped && st.Reason != "":
					t.Errorf("%s is %s with a reason %q", st.Step, st.State, st.Reason)
				}
			}
			if s := strings.Join(got, " "); s != tc.want {
				t.Errorf("got  %s\nwant %s", s, tc.want)
			}
		})
	}
}
