package store

import (
	"context"
	"reflect"
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
