package postgres

import (
	"slices"

	"github.com/sluice-project/sluice/internal/record"
)

// The tasks and events of items a transaction inserted go in without ON CONFLICT.
//
// No row of an item inserted in a transaction can be in the database unless that transaction
// wrote it: no other transaction sees the item, nor its id (drawn from the sequence), before the
// commit, and nothing deletes tasks or events. So the driver, which sees every task and event the
// transaction writes, knows for such an item which of them are new, and inserts those with a
// plain INSERT: ON CONFLICT DO NOTHING is a speculative insertion, a check of the unique index
// and a token on the row, which cost a fan-out about a quarter of its task inserts' database CPU
// (docs/performance.md). A row the transaction wrote already is left alone in memory, as the
// database would have left it.

// fresh holds, for each item inserted in the transaction, the task steps and event names the
// transaction has written for it: a few words an item, for items the engine's transaction holds
// in memory anyway (AddRoots inserts 500 a transaction, a fan-out at most 2,048).
type fresh map[int64]*freshRows

type freshRows struct {
	steps, events []string
}

// addFresh records items the transaction inserted (and did not find there already).
func (q *queries) addFresh(ids ...int64) {
	if !q.inTx {
		return
	}
	if q.fresh == nil {
		q.fresh = fresh{}
	}
	for _, id := range ids {
		q.fresh[id] = &freshRows{}
	}
}

// addFreshItems records the items an insert returned (those it did not find there already).
func (q *queries) addFreshItems(items []*record.Item) {
	for _, it := range items {
		q.addFresh(it.ID)
	}
}

// rowOld, rowNew and rowSeen are what claim says of a task or event the transaction is about to insert.
const (
	rowOld  = iota // of an item not inserted in this transaction: ON CONFLICT decides
	rowNew         // of an item inserted in this transaction, not written yet: a plain INSERT
	rowSeen        // written already in this transaction: left alone
)

// claim says how to insert the task step (or event name, when event) of the item, and counts it
// as written when it is new.
func (q *queries) claim(itemID int64, name string, event bool) int {
	r := q.fresh[itemID]
	if r == nil {
		return rowOld
	}
	names := &r.steps
	if event {
		names = &r.events
	}
	if slices.Contains(*names, name) {
		return rowSeen
	}
	*names = append(*names, name)
	return rowNew
}

// wrote records a task or event that an ON CONFLICT insert wrote, for an item inserted in this
// transaction.
func (q *queries) wrote(itemID int64, name string, event bool) {
	if q.fresh[itemID] != nil {
		q.claim(itemID, name, event)
	}
}
