package driver

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// CompleteTx marks the job done inside tx, the handler's own transaction, so that the
// job's effects and its completion commit together, or neither does. The result recorded
// with [Job.SetResult] before the call is stored with the completion. It calls jobs_complete,
// which locks the job's row until tx ends. It returns ErrNotHeld when the job is no longer
// held at its attempt (another attempt may have run or be running): roll tx back then.
//
// A handler that called CompleteTx successfully must commit tx and return nil; the driver
// then sends no completion of its own. If tx rolls back after all, return an error, or the
// job stays running until its lease expires and runs again.
func CompleteTx[T any](ctx context.Context, tx pgx.Tx, job *Job[T]) error {
	var ok bool
	if err := tx.QueryRow(ctx, completeSQL, job.ID, int32(job.Attempt), []byte(job.result)).Scan(&ok); err != nil {
		return fmt.Errorf("failed to complete job %d in transaction: %w", job.ID, sqlInvalid(err))
	}
	if !ok {
		return ErrNotHeld
	}
	if job.ex != nil {
		job.ex.completedInTx.Store(true)
	}
	return nil
}
