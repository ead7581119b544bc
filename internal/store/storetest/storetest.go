// Package storetest is the conformance suite every [store.Store] driver runs, so the embedded
// SQLite store and PostgreSQL are held to one contract: the SQL semantics of DESIGN §4 (keyed,
// idempotent writes; guarded task transitions; leases) expressed as behaviour, not as SQL.
package storetest

import (
	"testing"

	"github.com/sluice-project/sluice/internal/store"
)

// Exercise runs the conformance suite. open must return a new, empty, migrated store for each call
// and close it when the test ends; subtests run in parallel.
func Exercise(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, b *bundle)
	}{
		{"Workflows", testWorkflows},
		{"Jobs", testJobs},
		{"JobSeal", testJobSeal},
		{"JobReopen", testJobReopen},
		{"JobKeyConflictKeepsTx", testJobKeyConflictKeepsTx},
		{"JobHasOpenItems", testJobHasOpenItems},
		{"JobProgress", testJobProgress},
		{"ItemInsert", testItemInsert},
		{"ItemInsertMany", testItemInsertMany},
		{"ItemInsertRoots", testItemInsertRoots},
		{"ItemList", testItemList},
		{"ItemSetState", testItemSetState},
		{"ItemManyAtOnce", testItemManyAtOnce},
		{"ItemReopen", testItemReopen},
		{"ItemUpdateSetOnce", testItemUpdateSetOnce},
		{"ItemUpdateMetadataMerge", testItemUpdateMetadataMerge},
		{"ItemColoredCappedAtShare", testItemColored},
		{"ItemChildren", testItemChildren},
		{"ItemChildrenFrom", testItemChildrenFrom},
		{"Events", testEvents},
		{"Waits", testWaits},
		{"ItemListByMetadata", testItemListByMetadata},
		{"Claims", testClaims},
		{"Limits", testLimits},
		{"TaskInsert", testTaskInsert},
		{"InsertMany", testInsertMany},
		{"TaskLeaseOrder", testTaskLeaseOrder},
		{"TaskLeaseLimit", testTaskLeaseLimit},
		{"TaskLeaseRunAfter", testTaskLeaseRunAfter},
		{"TaskGetAvailable", testTaskGetAvailable},
		{"TaskFinishGuard", testTaskFinishGuard},
		{"BriefBatch", testBriefBatch},
		{"BriefRollback", testBriefRollback},
		{"TaskFinishRefund", testTaskFinishRefund},
		{"TaskLastWorker", testTaskLastWorker},
		{"TaskRenewLeases", testTaskRenewLeases},
		{"TaskListExpired", testTaskListExpired},
		{"TaskLists", testTaskLists},
		{"TaskCancelJob", testTaskCancelJob},
		{"TaskRetry", testTaskRetry},
		{"TaskNextRunAfter", testTaskNextRunAfter},
		{"TaskReadyQueues", testTaskReadyQueues},
		{"Batches", testBatches},
		{"Attempts", testAttempts},
		{"Outputs", testOutputs},
		{"Documents", testDocuments},
		{"Cache", testCache},
		{"BlobIsReferenced", testBlobIsReferenced},
		{"NotFound", testNotFound},
		{"InTxRollback", testInTxRollback},
		{"InTxReadsOwnWrites", testInTxReadsOwnWrites},
		{"ConcurrentLease", testConcurrentLease},
		{"Wait", testWait},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, setup(t, open))
		})
	}
}
