package store

import "context"

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
	return s.byGorm(model)
}
