// Package queue names the queues ready tasks wait in, the one place that knows their format:
// a queue per action ("pdf"), a queue per step that sets its own concurrency
// ("pdf@workflow/step", so the limit applies to that step alone), and a queue per name served
// by remote workers ("remote:Pdf"). Stores keep a queue's name as text.
package queue

import "strings"

// Name is a queue's name.
type Name string

const remotePrefix = "remote:"

// Action returns the queue of an action's tasks.
func Action(action string) Name { return Name(action) }

// Step returns the queue of a step with its own concurrency limit.
func Step(action, workflow, step string) Name { return Name(action + "@" + workflow + "/" + step) }

// Remote returns the queue that remote workers serving name lease from.
func Remote(name string) Name { return Name(remotePrefix + name) }

// Remote returns the name remote workers serve the queue under, and whether it is such a
// queue: the in-process worker leaves those alone.
func (n Name) Remote() (string, bool) {
	name, ok := strings.CutPrefix(string(n), remotePrefix)
	if !ok {
		return "", false
	}
	return name, true
}

// String returns the name as stores keep it.
func (n Name) String() string { return string(n) }
