package workerproto

import (
	"context"
	"fmt"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/settings"
)

// RemoteAction returns the catalog entry for steps served by remote workers:
//
//	convert: {action: remote, needs: [detected.pdf], with: {name: Pdf}}
//
// Tasks of such a step go to the queue "remote:<name>" (see engine.Engine.Queue) and are handed out
// at the poll URL <prefix>/<name>. The action exists so that workflows using it validate; its Run
// is never meant to be called in process and fails (transiently) if it is.
func RemoteAction() action.Action { return remoteAction{} }

type remoteAction struct{}

func (remoteAction) Spec() action.Spec {
	return action.Spec{
		Name:     "remote",
		Doc:      "Hand the item to remote workers polling <base>/v1/workers/<name> (the worker protocol).",
		Settings: remoteSettings.Settings(),
		Validate: remoteSettings.Validate,
	}
}

// remoteSettings are the remote action's: the name remote workers poll for.
var remoteSettings = settings.For(nil, func(c *struct {
	Name string `with:"name" required:"true" doc:"the remote action name workers poll for, such as Pdf (case-sensitive)"`
}) error {
	if c.Name == "" {
		return &action.SettingError{Key: "name", Reason: "must be a non-empty string"}
	}
	return nil
})

func (remoteAction) Run(_ context.Context, t *action.Task, _ action.Output) error {
	c, err := remoteSettings.Parse(t.With)
	if err != nil {
		return action.Permanent(err)
	}
	return fmt.Errorf("action remote (name %s) is served by remote workers, not in process: check the worker's queues", c.Name)
}
