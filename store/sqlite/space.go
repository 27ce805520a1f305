package sqlite

import (
	"context"
	"fmt"
)

// SpaceUsage reads the page counts of every table and index from SQLite's dbstat
// table. It reads every page of the file, so it takes as long as a full scan: it is
// for measuring, not for a request.
func (db *DB) SpaceUsage(ctx context.Context) (*Space, error) {
	sp := &Space{}
	err := db.inReadTx(ctx, func(tx *Tx) error {
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM tasks`).Scan(&sp.Tasks); err != nil {
			return err
		}
		var pages, pageSize int64
		if err := tx.QueryRowContext(ctx, `SELECT page_count, page_size FROM pragma_page_count(), pragma_page_size()`).Scan(&pages, &pageSize); err != nil {
			return err
		}
		sp.Bytes = pages * pageSize
		// aggregate = TRUE sums each object's pages in SQLite instead of a row per page.
		rows, err := tx.QueryContext(ctx, `SELECT name, pgsize, unused FROM dbstat WHERE aggregate = TRUE ORDER BY pgsize DESC, name`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var o ObjectSpace
			if err := rows.Scan(&o.Name, &o.Bytes, &o.Unused); err != nil {
				return err
			}
			sp.Objects = append(sp.Objects, o)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("reading the database's space: %w", err)
	}
	return sp, nil
}
