package api_test

import (
	"time"

	"testing"

	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/poll"
)

// TestQueues: a job of five files whose step no worker serves (a remote action, no remote
// worker) shows in GET /v1/queues as a backlog of five with an age, nothing running, no
// throughput, and a recommendation of one worker per task; /metrics has the same figures.
func TestQueues(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		b := setupOn(t, open)
		b.json(t, "POST", "/v1/workflows", "name: r\nsteps:\n  conv: {action: remote, needs: [start], with: {name: Pdf}}\n", 201, nil)
		var empty map[string]any
		b.json(t, "GET", "/v1/queues", nil, 200, &empty)
		if qs := empty["queues"].([]any); len(qs) != 0 || empty["window_seconds"] != float64(60) {
			t.Fatalf("queues before any job: %v", empty)
		}
		b.upload(t, "r", "a.pdf", "b.pdf", "c.pdf", "d.pdf", "e.pdf")
		type queue struct {
			Queue              string  `json:"queue"`
			Action             string  `json:"action"`
			Backlog            int     `json:"backlog"`
			OldestAgeSeconds   float64 `json:"oldest_age_seconds"`
			Running            int     `json:"running"`
			Throughput         int     `json:"throughput"`
			RecommendedWorkers int     `json:"recommended_workers"`
		}
		var got struct {
			Queues             []queue `json:"queues"`
			RecommendedWorkers int     `json:"recommended_workers"`
		}
		poll.Until(t, 30*time.Second, "an age on the backlog", func() (bool, string) {
			b.json(t, "GET", "/v1/queues", nil, 200, &got)
			return len(got.Queues) == 1 && got.Queues[0].OldestAgeSeconds > 0, ""
		})
		q := got.Queues[0]
		if q.Queue != "remote:Pdf" || q.Action != "remote" || q.Backlog != 5 || q.Running != 0 || q.Throughput != 0 || q.RecommendedWorkers != 5 || got.RecommendedWorkers != 5 {
			t.Fatalf("queues = %+v", got)
		}
		mfs := b.scrape(t)
		for name, want := range map[string]float64{"sluice_queue_backlog": 5, "sluice_queue_recommended_workers": 5, "sluice_queue_running": 0} {
			if v, ok := value(mfs[name], map[string]string{"queue": "remote:Pdf", "action": "remote"}); !ok || v != want {
				t.Errorf("%s = %v (%v), want %v", name, v, ok, want)
			}
		}
	})
}
