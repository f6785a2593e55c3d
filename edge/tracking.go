package edge

import (
	"log/slog"
	"net/http"
	"strconv"

	"github.com/postmill/postmill/ports"
)

// maxTrackingTokenLen bounds the tokens the tracking routes pass to the core. Postmill's tokens are about
// 120 characters; anything longer is refused without decoding.
const maxTrackingTokenLen = 512

// transparentGIF is the open pixel: a 43-byte GIF89a, 1x1, one transparent colour.
var transparentGIF = []byte{
	'G', 'I', 'F', '8', '9', 'a', // header
	0x01, 0x00, 0x01, 0x00, 0x80, 0x00, 0x00, // 1x1, global colour table of 2 entries
	0x00, 0x00, 0x00, 0xff, 0xff, 0xff, // the colour table
	0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00, // graphic control: colour 0 is transparent
	0x2c, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, // image descriptor
	0x02, 0x02, 0x44, 0x01, 0x00, // LZW-coded pixel
	0x3b, // trailer
}

// noStore is the Cache-Control of both tracking routes: every open and click must reach the edge, and no
// shared cache may keep a recipient's pixel or redirect (RFC 9111 §5.2.2).
const noStore = "no-store, no-cache, must-revalidate, private"

// registerTrackingRoutes mounts the open pixel and the click redirect: GET /t/o/{token} and GET
// /t/c/{token}, public, for any Host (mail links them at track.<sender's domain>, a CNAME to the tracking
// host). The pixel route takes anything under /t/o/, so even a mangled pixel URL gets an image. They live on the mux beside /healthz rather than in the API: they are not part of the REST
// contract, answer GIFs and redirects rather than JSON, and stay out of the OpenAPI document. The access
// log names them by route pattern, so tokens never reach the logs.
//
// HEAD: link scanners and mail proxies probe URLs with HEAD before (or instead of) a person following
// them, so HEAD never records anything. HEAD of the pixel answers the pixel's headers; HEAD of a click
// answers 405 with Allow: GET, because finding the redirect target is what records the click.
func (s *Server) registerTrackingRoutes() {
	s.mux.HandleFunc("GET /t/o/{token...}", s.trackOpen)
	s.mux.HandleFunc("GET /t/c/{token}", s.trackClick)
}

// trackOpen always answers the pixel, whatever the token: a mail client must never show a broken image
// because a token was mangled or the message is gone. Only a GET with a token the core accepts records
// email.opened (once per message, decided by the core).
func (s *Server) trackOpen(w http.ResponseWriter, r *http.Request) {
	token := r.PathValue("token")
	switch {
	case r.Method != http.MethodGet, token == "":
	case len(token) > maxTrackingTokenLen:
		loggerFrom(r.Context()).Debug("tracking: open token too long", slog.Int("length", len(token)))
	default:
		if err := s.core.Tracking.Open(r.Context(), token); err != nil {
			logTrackingError(r, "open", err)
		}
	}
	h := w.Header()
	h.Set("Content-Type", "image/gif")
	h.Set("Content-Length", strconv.Itoa(len(transparentGIF)))
	h.Set("Cache-Control", noStore)
	h.Set("Pragma", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(transparentGIF)
	}
}

// trackClick redirects (302) to the URL the core found in the message as it was sent, and nowhere else: a
// token the core refuses is a 404 in the SPEC §7 shape, never a redirect.
func (s *Server) trackClick(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", noStore)
	if r.Method == http.MethodHead {
		w.Header().Set("Allow", http.MethodGet)
		writeJSONError(w, statusProblem(http.StatusMethodNotAllowed, "Tracking links answer GET only"))
		return
	}
	token := r.PathValue("token")
	if len(token) > maxTrackingTokenLen {
		loggerFrom(r.Context()).Debug("tracking: click token too long", slog.Int("length", len(token)))
		writeJSONError(w, statusProblem(http.StatusNotFound, msgLinkNotFound))
		return
	}
	target, err := s.core.Tracking.Click(r.Context(), token)
	if err != nil {
		switch ports.ErrorCode(err) {
		case ports.CodeInvalidArgument, ports.CodeNotFound:
			logTrackingError(r, "click", err)
			writeJSONError(w, statusProblem(http.StatusNotFound, msgLinkNotFound))
		default:
			logInternal(r.Context(), "tracking click", err)
			writeJSONError(w, statusProblem(http.StatusInternalServerError, ""))
		}
		return
	}
	if target == "" {
		// A core that answers no URL and no error has nowhere to send the recipient.
		logInternal(r.Context(), "tracking click: empty URL")
		writeJSONError(w, statusProblem(http.StatusInternalServerError, ""))
		return
	}
	w.Header().Set("Location", target)
	w.WriteHeader(http.StatusFound)
}

// msgLinkNotFound is the message of a click on a token Postmill did not make or on a link that is gone.
const msgLinkNotFound = "Link not found"

// logTrackingError logs why a tracking request recorded nothing: at debug for tokens that are not ours or
// name something gone (scanners and mangled URLs make them all day), as an internal error otherwise.
func logTrackingError(r *http.Request, what string, err error) {
	switch ports.ErrorCode(err) {
	case ports.CodeInvalidArgument, ports.CodeNotFound:
		loggerFrom(r.Context()).Debug("tracking: "+what+" not recorded", slog.String("error", err.Error()))
	default:
		logInternal(r.Context(), "tracking "+what, err)
	}
}
