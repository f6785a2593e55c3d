package edge

import (
	"reflect"

	"github.com/danielgtaylor/huma/v2"

	"github.com/postmill/postmill/ports"
)

// The suppression, domain, template and webhook lists answer in two shapes. SPEC §9.2 keeps a bare JSON
// array for clients that send neither limit nor cursor: it holds the newest ports.MaxUnpagedListRows rows.
// With limit or cursor the answer is a page, {data, nextCursor}, the shape of GET /v1/emails and
// GET /v1/bounces.

// listQuery is the query of a list with both shapes. Limit has no default: its absence is what asks for
// the bare array.
type listQuery struct {
	Limit  int    `query:"limit" minimum:"1" maximum:"100" doc:"Page size, 1-100. With limit or cursor the answer is a page {data, nextCursor} (limit 25 when only cursor is given); with neither, a bare array of the newest 1000"`
	Cursor string `query:"cursor" maxLength:"1024" doc:"nextCursor of the previous page"`
}

// paged reports whether the client asked for a page rather than the bare array.
func (q listQuery) paged() bool { return q.Limit != 0 || q.Cursor != "" }

func (q listQuery) pageQuery() ports.PageQuery {
	return ports.PageQuery{Limit: q.Limit, Cursor: q.Cursor}
}

// listBody is a list's answer in either shape; its OpenAPI schema is a oneOf of the two.
type listBody[T any] struct {
	items []T
	paged bool
	next  string
}

// bareList is the bare-array answer.
func bareList[T any](items []T) listBody[T] { return listBody[T]{items: items} }

// pageList is the page answer; next is "" on the last page and renders as null.
func pageList[T any](items []T, next string) listBody[T] {
	return listBody[T]{items: items, paged: true, next: next}
}

type listPage[T any] struct {
	Data       []T     `json:"data"`
	NextCursor *string `json:"nextCursor"`
}

// MarshalJSON writes the array, or the page with data never null.
func (l listBody[T]) MarshalJSON() ([]byte, error) {
	items := l.items
	if items == nil {
		items = []T{}
	}
	if !l.paged {
		return marshalJSON(items)
	}
	return marshalJSON(listPage[T]{Data: items, NextCursor: nullIfEmpty(l.next)})
}

// Schema documents both shapes.
func (listBody[T]) Schema(r huma.Registry) *huma.Schema {
	item := r.Schema(reflect.TypeFor[T](), true, "")
	return &huma.Schema{OneOf: []*huma.Schema{
		{
			Type: huma.TypeArray, Items: item,
			Description: "Without limit and cursor: the newest 1000, newest first (SPEC §9.2)",
		},
		{
			Type:        huma.TypeObject,
			Description: "With limit or cursor: one page, newest first",
			Required:    []string{"data", "nextCursor"},
			Properties: map[string]*huma.Schema{
				"data":       {Type: huma.TypeArray, Items: item, Description: "Newest first"},
				"nextCursor": {Type: huma.TypeString, Nullable: true, Description: "Pass as cursor for the next page; null on the last page"},
			},
		},
	}}
}

// offsetQuery is the query of the topic, segment and broadcast lists: the limit and offset of
// GET /v1/contacts (SPEC §4.7, §8), bounds checked here before the core is asked. The answer is a bare array
// of that page, newest first.
type offsetQuery struct {
	Limit  int `query:"limit" minimum:"1" maximum:"100" default:"25" doc:"Page size, 1-100"`
	Offset int `query:"offset" minimum:"0" default:"0" doc:"Rows to skip, newest first"`
}

// mapItems converts every item of a list, never answering nil.
func mapItems[T, U any](in []T, convert func(T) U) []U {
	out := make([]U, 0, len(in))
	for _, v := range in {
		out = append(out, convert(v))
	}
	return out
}
