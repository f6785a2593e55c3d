package edge

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"
)

// docsFiles is the API reference page and the OpenAPI viewer it loads, compiled into the binary so that /docs
// works on a machine with no internet access. docsui/assets/swagger-ui is swagger-ui-dist as fetched by
// deploy/scripts/docs-bundle.sh (version and licence in docsui/README.md); index.html and assets/docs.js are
// Postmill's own.
//
//go:embed docsui/index.html docsui/assets
var docsFiles embed.FS

// docsAsset is one embedded file ready to serve: its bytes, a strong ETag, and a gzip copy made the first
// time a client that accepts gzip asks (the viewer's script is 1.7 MB, about a quarter of that gzipped).
type docsAsset struct {
	name        string
	contentType string
	body        []byte
	etag        string

	gzipOnce sync.Once
	gzipped  []byte
}

// docsSite serves the page and the assets; it is built once in New.
type docsSite struct {
	page   *docsAsset
	assets map[string]*docsAsset // by path below /docs/assets/
}

func newDocsSite() (*docsSite, error) {
	page, err := loadDocsAsset("docsui/index.html")
	if err != nil {
		return nil, err
	}
	d := &docsSite{page: page, assets: map[string]*docsAsset{}}
	err = fs.WalkDir(docsFiles, "docsui/assets", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		a, err := loadDocsAsset(p)
		if err != nil {
			return err
		}
		d.assets[strings.TrimPrefix(p, "docsui/assets/")] = a
		return nil
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

func loadDocsAsset(name string) (*docsAsset, error) {
	body, err := docsFiles.ReadFile(name)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	ct, ok := docsContentTypes[path.Ext(name)]
	if !ok {
		ct = "text/plain; charset=utf-8" // LICENSE, NOTICE, VERSION, the third-party licence list
	}
	return &docsAsset{name: name, contentType: ct, body: body, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}, nil
}

// docsContentTypes is fixed here rather than read from the system's mime.types, which differ between
// machines (application/javascript or text/javascript) while nosniff makes the type matter.
var docsContentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
}

// servePage answers GET /docs.
func (d *docsSite) servePage(w http.ResponseWriter, r *http.Request) { d.page.serve(w, r) }

// serveAsset answers GET /docs/assets/{file...}; an unknown file is the usual 404 body.
func (d *docsSite) serveAsset(w http.ResponseWriter, r *http.Request) {
	a, ok := d.assets[r.PathValue("file")]
	if !ok {
		notFound(w, r)
		return
	}
	a.serve(w, r)
}

// serve writes the asset with revalidation on every use (no-cache plus the ETag), so a new binary's files
// replace the old ones at once while an unchanged file costs a 304.
func (a *docsAsset) serve(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", a.contentType)
	h.Set("Cache-Control", "no-cache")
	body, etag := a.body, a.etag
	if a.compressible() {
		h.Add("Vary", "Accept-Encoding")
		if acceptsGzip(r) {
			body, etag = a.gzip(), strings.TrimSuffix(a.etag, `"`)+`-gzip"`
			h.Set("Content-Encoding", "gzip")
		}
	}
	h.Set("ETag", etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}

func (a *docsAsset) compressible() bool {
	return len(a.body) > 1024 && (strings.HasPrefix(a.contentType, "text/") || strings.Contains(a.contentType, "javascript"))
}

func (a *docsAsset) gzip() []byte {
	a.gzipOnce.Do(func() {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		_, _ = zw.Write(a.body)
		_ = zw.Close()
		a.gzipped = buf.Bytes()
	})
	return a.gzipped
}

// acceptsGzip reads Accept-Encoding loosely: gzip listed without q=0.
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(name), "gzip") {
			q := strings.ReplaceAll(params, " ", "")
			return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
		}
	}
	return false
}
