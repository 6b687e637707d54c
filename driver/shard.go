package driver

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgxpool"
)

// ShardCount is how many shard numbers a job id can carry: a shard made with
// jobs_set_shard(n) hands out only ids with id % ShardCount = n, so the shards are numbered
// 0 to ShardCount-1.
const ShardCount = 1024

// ShardOf returns the number of the shard that holds the job with this id: id % ShardCount,
// the number jobs_set_shard put in the id's low 10 bits. It needs no lookup, so any process
// holding a job id can route calls about the job. Job ids are positive; ShardOf of a
// negative id is negative, which is no shard.
func ShardOf(id int64) int { return int(id % ShardCount) }

// Shard is one database of a sharded skiplock, for [NewShardedClient].
type Shard struct {
	// Number is the shard's number, 0 to ShardCount-1: the one given to jobs_set_shard on
	// its database. The client checks it against jobs_shard() before it works the shard.
	// Required (0 is a valid number).
	Number int

	// Pool connects to the shard's database. It serves the shard's claims, completions
	// and heartbeats, as a [Client]'s pool does. Required.
	Pool *pgxpool.Pool

	// ListenerURL is the shard's LISTEN connection string, as Config.ListenerURL is for a
	// Client (Config.ListenerURL must then be empty). Defaults to "": a connection made from
	// Pool's configuration.
	ListenerURL string
}

// ErrWrongShard is wrapped by the error [ShardedClient.Run] gives up with when a shard's
// database is not the shard it was configured as: jobs_shard() returned another number, or
// NULL (jobs_set_shard was never called there). Routing by id would send that database's
// jobs elsewhere, so the client does not work it.
var ErrWrongShard = errors.New("database is not the shard it was configured as")

// ShardError is an error from one shard of a [ShardedClient]: it names the shard and wraps
// the cause (test with errors.Is and errors.As as usual).
type ShardError struct {
	// Shard is the shard's number.
	Shard int

	// Err is what went wrong there.
	Err error
}

func (e *ShardError) Error() string { return "shard " + strconv.Itoa(e.Shard) + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *ShardError) Unwrap() error { return e.Err }

// UnknownShardError reports a job id whose shard (see [ShardOf]) is not one of the client's
// shards: the id is wrong, or the client is missing a shard. [ShardedClient.Pool] returns it.
type UnknownShardError struct {
	// ID is the job id.
	ID int64

	// Shard is the shard the id names, ShardOf(ID).
	Shard int
}

func (e *UnknownShardError) Error() string {
	return fmt.Sprintf("job %d is on shard %d, which is not one of the client's shards", e.ID, e.Shard)
}
