package workerproto

import "github.com/sluice-project/sluice/remote"

// The worker side of the protocol is the public package github.com/sluice-project/sluice/remote;
// these aliases keep the server and `sluice worker` on the same types.
type (
	Client     = remote.Client
	TaskHandle = remote.TaskHandle
	Stream     = remote.Stream
	Task       = remote.Task
	TaskBlob   = remote.TaskBlob
)

// ErrGone is [remote.ErrGone].
var ErrGone = remote.ErrGone
