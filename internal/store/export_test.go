package store

import (
	"context"
	"errors"
	"reflect"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// InsertRow writes row as the store's hot paths do (insert), skipping an existing row
// when skipExisting; for the tests of the insert plans.
func (s *Store) InsertRow(ctx context.Context, row any, skipExisting bool) (int64, error) {
	mode := insertOrFail
	if skipExisting {
		mode = insertOrSkip
	}
	return s.insert(ctx, row, mode)
}

// WrittenByGorm reports whether insert leaves rows of model's type to gorm's Create.
func (s *Store) WrittenByGorm(model any) (bool, error) {
	p, err := s.insertPlanOf(reflect.TypeOf(model).Elem(), insertOrFail, nil)
	if err != nil {
		return false, err
	}
	return p.byGorm, nil
}

// RunsPrepared reports whether the insert of model's rows runs, in a transaction of the
// store, as a statement prepared at start.
func (s *Store) RunsPrepared(ctx context.Context, model any) (bool, error) {
	p, err := s.insertPlanOf(reflect.TypeOf(model).Elem(), insertOrFail, nil)
	if err != nil {
		return false, err
	}
	var prepared bool
	err = s.Tx(ctx, func(tx *Store) error {
		prepared = tx.preparedFor(ctx, p.query) != nil
		return nil
	})
	return prepared, err
}

// statements records the SQL of the statements run through it, with the values in place,
// instead of running them (gorm's dry run).
type statements struct {
	logger.Interface
	sql []string
}

func (r *statements) Trace(_ context.Context, _ time.Time, fc func() (string, int64), _ error) {
	sql, _ := fc()
	r.sql = append(r.sql, sql)
}

// QueryPlans is SQLite's plan (EXPLAIN QUERY PLAN, a line per step) for each statement
// that read runs on the store, read being run on a copy that only writes its SQL down.
func (s *Store) QueryPlans(ctx context.Context, read func(*Store) error) ([][]string, error) {
	rec := &statements{Interface: logger.Discard}
	dry := *s
	dry.db = s.db.Session(&gorm.Session{DryRun: true, Logger: rec})
	if err := read(&dry); err != nil {
		return nil, err
	}
	var plans [][]string
	for _, q := range rec.sql {
		rows, err := s.db.WithContext(ctx).Raw("EXPLAIN QUERY PLAN " + q).Rows()
		if err != nil {
			return nil, err
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				_ = rows.Close()
				return nil, err
			}
			plan = append(plan, detail)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, err
		}
		plans = append(plans, plan)
	}
	return plans, nil
}

// Analyze has the database read its planner's statistics again, as a steady use's
// maintenance (SQLite's PRAGMA optimize, PostgreSQL's autovacuum) would.
func (s *Store) Analyze(ctx context.Context) error {
	return s.db.WithContext(ctx).Exec("ANALYZE").Error
}
