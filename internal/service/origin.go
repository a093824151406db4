package service

import "context"

// Origin is what a front end knows of a request before any rule runs: its correlation id
// (the one the answer carries) and the client's address as the edge judged it (believing
// only trusted proxies). The HTTP edge puts it on the request's context; a front end
// mounted behind it, such as the console, reads it from there instead of re-deriving it.
type Origin struct {
	CorrelationID string
	ClientAddr    string
}

type originKey struct{}

// WithOrigin returns ctx carrying o.
func WithOrigin(ctx context.Context, o Origin) context.Context {
	return context.WithValue(ctx, originKey{}, o)
}

// OriginOf is the origin ctx carries; the zero Origin when none.
func OriginOf(ctx context.Context) Origin {
	o, _ := ctx.Value(originKey{}).(Origin)
	return o
}
