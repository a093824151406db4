// Package apitypes holds the JSON bodies of the REST API that the server (api) writes and
// reads and its Go client (client) reads and writes: each shape is declared once, so the
// two cannot drift apart. A field is what goes on the wire: a value that may be null is a
// pointer, a timestamp an events.Time (ISO 8601 UTC with milliseconds).
//
// Bodies the server assembles from stored JSON (an order with its domain's fields, an
// approval item with the order's summary) are not here: the server writes them as stored,
// and client declares how it reads them.
package apitypes
