package postgres

import "github.com/sluice-project/sluice/internal/store"

// Abandon forgets the brief batch of the transaction x, as a process that dies does: the
// transaction then ends without turning its record into written leases.
func Abandon(x store.Executor) { x.(*queries).brief = nil }
