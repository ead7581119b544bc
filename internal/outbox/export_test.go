package outbox

import "context"

// PendingIDs returns the ids of the messages the sink's relay would read now, in the order it
// would send them.
func PendingIDs(ctx context.Context, o *Outbox, name string) ([]string, error) {
	rows, err := o.pending(ctx, name, 100)
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.msg.ID
	}
	return out, err
}
