package apitypes

import "encoding/json"

// Page is the envelope of every list (SPEC 2): a page of Data and the cursor that
// continues it.
type Page[T any] struct {
	Data []T `json:"data"`
	// NextCursor continues the list: pass it as the next call's cursor (after, for
	// events). It is empty on the last page.
	NextCursor Cursor `json:"nextCursor"`
}

// Cursor is an opaque place in a list. The wire writes the empty cursor (the end of the
// list) as null.
type Cursor string

// MarshalJSON writes the empty cursor as null.
func (c Cursor) MarshalJSON() ([]byte, error) {
	if c == "" {
		return []byte("null"), nil
	}
	return json.Marshal(string(c))
}
