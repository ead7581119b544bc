package api

import (
	"net/http"
	"time"

	"github.com/sluice-project/sluice/internal/scale"
)

// queueList is GET /v1/queues.
type queueList struct {
	Queues []scale.Queue `json:"queues"`
	// WindowSeconds is how far back throughput counts; DrainTargetSeconds how soon the
	// recommended workers would clear each backlog (docs/scale-out.md).
	WindowSeconds      float64 `json:"window_seconds"`
	DrainTargetSeconds float64 `json:"drain_target_seconds"`
	// RecommendedWorkers sums the queues' recommendations.
	RecommendedWorkers int `json:"recommended_workers"`
}

// listQueues answers the scaling signal of every queue with work.
func (a *API) listQueues(w http.ResponseWriter, r *http.Request) error {
	qs, err := scale.Read(r.Context(), a.rec, time.Now().UTC())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, queueList{Queues: qs, WindowSeconds: scale.Window.Seconds(), DrainTargetSeconds: scale.DrainTarget.Seconds(),
		RecommendedWorkers: scale.Total(qs, nil)})
	return nil
}
