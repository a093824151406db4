package client

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"net/http"
	"net/url"
	"strconv"

	"github.com/opentreasury/treasury/apitypes"
)

// Page is one page of a list. Its NextCursor continues the list: pass it as the next
// call's Cursor. It is empty on the last page.
type Page[T any] = apitypes.Page[T]

// Cursor is an opaque place in a list.
type Cursor = apitypes.Cursor

// ListOptions page through a list. The iterators (Wallets, Orders, …) follow the cursor
// themselves: there Limit is the size of each page they read, and Cursor where they start.
type ListOptions struct {
	// Limit is the page size, 1 to 200 (zero: the server's default, 50).
	Limit int
	// Cursor is the previous page's NextCursor; empty for the first page.
	Cursor string
}

func (o ListOptions) query() url.Values {
	q := url.Values{}
	setPage(q, o.Limit, o.Cursor)
	return q
}

func setPage(q url.Values, limit int, cursor string) {
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	set(q, "cursor", cursor)
}

// set adds a filter that was given.
func set(q url.Values, name, value string) {
	if value != "" {
		q.Set(name, value)
	}
}

func withQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// get reads one resource.
func get[T any](ctx context.Context, c *Client, path string, opts []CallOption) (*T, error) {
	return do[T](ctx, c, http.MethodGet, path, nil, opts)
}

// do sends a call whose answer is a T.
func do[T any](ctx context.Context, c *Client, method, path string, body any, opts []CallOption) (*T, error) {
	var out T
	if err := c.send(ctx, call{method: method, path: path, body: body, out: &out, opts: opts}); err != nil {
		return nil, err
	}
	return &out, nil
}

// list reads one page.
func list[T any](ctx context.Context, c *Client, path string, q url.Values, opts []CallOption) (*Page[T], error) {
	return get[Page[T]](ctx, c, withQuery(path, q), opts)
}

// all reads a list page by page, passing each page's cursor as the query parameter
// cursorParam of the next. It stops at the first error, after yielding it.
func all[T any](ctx context.Context, c *Client, path string, q url.Values, cursorParam string, opts []CallOption) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		q := maps.Clone(q)
		if q == nil {
			q = url.Values{}
		}
		for {
			page, err := list[T](ctx, c, path, q, opts)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, item := range page.Data {
				if !yield(item, nil) {
					return
				}
			}
			if page.NextCursor == "" {
				return
			}
			// A server that hands back the cursor it was given would be paged forever.
			if string(page.NextCursor) == q.Get(cursorParam) {
				var zero T
				yield(zero, fmt.Errorf("client: GET %s: the next page's cursor is this page's", path))
				return
			}
			q.Set(cursorParam, string(page.NextCursor))
		}
	}
}
