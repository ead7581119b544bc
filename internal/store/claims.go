package store

import (
	"encoding/json"
	"fmt"
	"time"
)

// Claim states.
const (
	ClaimHeld = "held" // its holder task has not finished
	ClaimDone = "done" // its holder completed; Result is what the others reuse
)

// Claim is a key claimed by a task (claim or park).
type Claim struct {
	Key    string
	Holder int64 // the task that claimed it
	State  string
	Result []byte // JSON, set once done
}

// ClaimTakeParams claims Key for the running task TaskID.
type ClaimTakeParams struct {
	Key    string
	TaskID int64
	Now    time.Time
}

// ClaimFinishParams finishes the claim held by TaskID: done with Result when it is set (the
// task completed), dropped otherwise (it failed for good or was canceled), so that a parked
// task claims the key again.
type ClaimFinishParams struct {
	TaskID int64
	Result []byte
	Now    time.Time
}

// ItemMetadataParams finds the items of a job whose metadata holds Key with the value Value
// (JSON: a string, a number or a boolean).
type ItemMetadataParams struct {
	JobID int64
	Key   string
	Value []byte
	// AfterID pages: items with a larger id.
	AfterID int64
	Limit   int // defaults to 1000
}

// LimitAcquireParams asks for a slot of Key for the running task TaskID at its Attempt.
type LimitAcquireParams struct {
	Key     string
	TaskID  int64
	Attempt int
	// Concurrency bounds the slots of the key held by running tasks; 0: no bound.
	Concurrency int
	// Interval is the least time between two starts of the key; 0: no bound.
	Interval time.Duration
	Now      time.Time
}

// LimitAcquireResult says whether the slot was granted, and if not when to ask again.
type LimitAcquireResult struct {
	OK bool
	// Next, when not OK, is the earliest time a start of the key may be granted (the rate), or
	// zero when it waits for a running task to end (the concurrency).
	Next time.Time
}

// MetadataProbe returns the JSON object {key: value} that a metadata lookup looks for, checking
// that value is a JSON string, number or boolean.
func MetadataProbe(key string, value []byte) ([]byte, error) {
	var v any
	if err := json.Unmarshal(value, &v); err != nil {
		return nil, fmt.Errorf("metadata value %q is not JSON: %w", value, err)
	}
	switch v.(type) {
	case string, float64, bool:
	default:
		return nil, fmt.Errorf("metadata value %s: a lookup takes a string, a number or a boolean", value)
	}
	return json.Marshal(map[string]json.RawMessage{key: value})
}
