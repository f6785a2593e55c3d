package secret

import (
	"context"
	"fmt"

	"github.com/postmill/postmill/ports"
)

// DefaultReencryptBatch is how many values Reencrypt reads per round trip when batch is not positive.
const DefaultReencryptBatch = 500

// ReencryptCount is what Reencrypt did to one sealed column.
type ReencryptCount struct {
	Column ports.SealedColumn
	// Resealed values were sealed under an older master and now are under the primary.
	Resealed int
	// Current values were already sealed under the primary and were left as they were.
	Current int
	// Changed values were rewritten by someone else between the read and the write; whatever wrote them
	// used its own primary, so a second run settles them.
	Changed int
	// Failed values open under no master on the keyring (a master removed too early, or a corrupted row);
	// they are left as they were.
	Failed int
	// FailedIDs are the row ids of the first failures, for the operator to look at.
	FailedIDs []string
}

// maxFailedIDs bounds the ids a report lists per column.
const maxFailedIDs = 20

// Reencrypt rewrites every value of every sealed column under the keyring's primary master, batch rows at a
// time, and reports counts per column. It is idempotent: values already under the primary are only checked,
// and each write is conditional on the value not having changed since it was read. A value that opens under
// no master is counted and skipped rather than stopping the run; a store error stops it.
func Reencrypt(ctx context.Context, k *Keyring, store ports.SealedStore, batch int) ([]ReencryptCount, error) {
	if batch <= 0 {
		batch = DefaultReencryptBatch
	}
	counts := make([]ReencryptCount, 0, len(ports.SealedColumns))
	for _, column := range ports.SealedColumns {
		c, err := reencryptColumn(ctx, k, store, column, batch)
		counts = append(counts, c)
		if err != nil {
			return counts, err
		}
	}
	return counts, nil
}

func reencryptColumn(ctx context.Context, k *Keyring, store ports.SealedStore, column ports.SealedColumn, batch int) (ReencryptCount, error) {
	c := ReencryptCount{Column: column}
	after := ""
	for {
		values, err := store.SealedValues(ctx, column, after, batch)
		if err != nil {
			return c, fmt.Errorf("secret: read %s: %w", column, err)
		}
		for _, v := range values {
			out, changed, err := k.Reseal(v.Sealed, []byte(v.ID))
			switch {
			case err != nil:
				c.Failed++
				if len(c.FailedIDs) < maxFailedIDs {
					c.FailedIDs = append(c.FailedIDs, v.ID)
				}
			case !changed:
				c.Current++
			default:
				ok, err := store.ReplaceSealed(ctx, column, v.ID, v.Sealed, out)
				if err != nil {
					return c, fmt.Errorf("secret: rewrite %s of %s: %w", column, v.ID, err)
				}
				if ok {
					c.Resealed++
				} else {
					c.Changed++
				}
			}
		}
		if len(values) < batch {
			return c, nil
		}
		after = values[len(values)-1].ID
	}
}
