package template

import (
	"container/list"
	"sync"

	"github.com/postmill/postmill/ports"
)

// DefaultCacheSize is how many compiled versions a Cache keeps when asked for a size below 1: sends of an
// organization reuse a handful of published versions, so a thousand covers many organizations at a few
// hundred kilobytes for typical emails.
const DefaultCacheSize = 1000

// DefaultCacheBytes bounds the memory a Cache's compiled versions take, as weight estimates it: a count
// alone let a tenant fill the server's memory with a thousand versions of a few MiB of placeholders each
// (one "{{ a }}" compiles to about 40 bytes of operations). A version heavier than the whole budget is
// compiled for each use and never kept.
const DefaultCacheBytes = 128 << 20

// opWeight is what weight counts for each compiled operation beyond its literal text: the operation, the
// variable path and the escaper it refers to.
const opWeight = 64

// weight estimates the memory cv takes.
func (cv *CompiledVersion) weight() int {
	n := 0
	for _, c := range []*Compiled{cv.Subject, cv.HTML, cv.Text} {
		if c != nil {
			n += c.litLen + opWeight*len(c.ops)
		}
	}
	return n
}

// CompiledVersion is a template version's three parts, compiled. An empty part compiles to a template that
// renders "".
type CompiledVersion struct {
	Subject, HTML, Text *Compiled
}

// CompileVersion compiles a stored version. A part that does not compile is reported as a validation error
// on its field (subject, html or text), so the error can be returned to whoever submitted the version.
func CompileVersion(v ports.TemplateVersion) (*CompiledVersion, error) {
	cv, violations := compileParts(v.Subject, v.HTML, v.Text)
	if len(violations) > 0 {
		return nil, ports.ValidationError(violations...)
	}
	return cv, nil
}

// compileParts compiles the three parts and reports every one that fails, with the part's field as path.
func compileParts(subject, htmlSrc, text string) (*CompiledVersion, []ports.FieldViolation) {
	var (
		cv         CompiledVersion
		violations []ports.FieldViolation
	)
	for _, part := range []struct {
		src  string
		mode Mode
		dst  **Compiled
	}{
		{subject, Subject, &cv.Subject},
		{htmlSrc, HTML, &cv.HTML},
		{text, Text, &cv.Text},
	} {
		c, err := Compile(part.src, part.mode)
		if err != nil {
			violations = append(violations, ports.FieldViolation{Path: part.mode.String(), Message: err.Error()})
			continue
		}
		*part.dst = c
	}
	if len(violations) > 0 {
		return nil, violations
	}
	return &cv, nil
}

// Render renders the three parts with vars. A part is built only up to just past what a send may carry
// (ports.MaxSubjectChars characters, of at most four bytes each, and ports.MaxBodyPartBytes): a part that
// comes out longer is cut there, and the send path refuses it as too long.
func (cv *CompiledVersion) Render(vars map[string]any) ports.RenderedTemplate {
	return ports.RenderedTemplate{
		Subject: cv.Subject.RenderAtMost(vars, 4*ports.MaxSubjectChars),
		HTML:    cv.HTML.RenderAtMost(vars, ports.MaxBodyPartBytes),
		Text:    cv.Text.RenderAtMost(vars, ports.MaxBodyPartBytes),
	}
}

// Cache keeps the most recently used compiled versions, keyed by version id. Versions are immutable, so an
// entry never goes stale; the bound only limits memory. It is safe for concurrent use.
type Cache struct {
	size     int
	maxBytes int // the weight the entries may add up to
	bytes    int // their weight now

	mu      sync.Mutex
	order   *list.List // front: most recently used; values are *cacheEntry
	entries map[string]*list.Element
}

type cacheEntry struct {
	id      string
	version *CompiledVersion
	weight  int
}

// NewCache returns a Cache that keeps up to size compiled versions (DefaultCacheSize when size < 1).
func NewCache(size int) *Cache {
	if size < 1 {
		size = DefaultCacheSize
	}
	return &Cache{size: size, maxBytes: DefaultCacheBytes, order: list.New(), entries: make(map[string]*list.Element)}
}

// Get returns v compiled, compiling it on a miss. Two goroutines missing the same version at once both
// compile it; the result is the same and one copy is kept. A version that does not compile is not cached.
// A version without an id is compiled and not cached.
func (c *Cache) Get(v ports.TemplateVersion) (*CompiledVersion, error) {
	if v.ID == "" {
		return CompileVersion(v)
	}
	if cv, ok := c.lookup(v.ID); ok {
		return cv, nil
	}
	cv, err := CompileVersion(v)
	if err != nil {
		return nil, err
	}
	return c.store(v.ID, cv), nil
}

// Len returns how many versions the cache holds.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// Lookup returns the compiled version with id when the cache holds it.
func (c *Cache) Lookup(id string) (*CompiledVersion, bool) {
	if id == "" {
		return nil, false
	}
	return c.lookup(id)
}

func (c *Cache) lookup(id string) (*CompiledVersion, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[id]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*cacheEntry).version, true
}

// store keeps cv unless another goroutine stored the same version first, and returns the kept one.
func (c *Cache) store(id string, cv *CompiledVersion) *CompiledVersion {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[id]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*cacheEntry).version
	}
	w := cv.weight()
	if w > c.maxBytes {
		return cv
	}
	c.entries[id] = c.order.PushFront(&cacheEntry{id: id, version: cv, weight: w})
	c.bytes += w
	for c.order.Len() > c.size || c.bytes > c.maxBytes {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		e := oldest.Value.(*cacheEntry)
		delete(c.entries, e.id)
		c.bytes -= e.weight
	}
	return cv
}
