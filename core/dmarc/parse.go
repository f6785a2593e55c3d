// Package dmarc reads DMARC aggregate reports (RFC 7489 §7.2 and appendix C) mailed to the report address
// (POSTMILL_DMARC_RUA), stores them for the organizations owning the reported domain, and summarises them
// by reporter and source IP for GET /v1/reputation/dmarc.
package dmarc

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"strings"
	"time"

	"github.com/postmill/postmill/ports"
)

// Bounds on what a report may make the parser read: reports from the largest receivers are a few MiB of
// XML; a compressed file that expands past MaxXMLBytes is refused (a zip bomb), as is a message with more
// than MaxParts parts or MaxRecords records.
const (
	MaxXMLBytes = 32 << 20
	MaxParts    = 32
	MaxRecords  = 100000
	maxDepth    = 4
)

// ErrNotReport is returned for mail that carries no aggregate report.
var ErrNotReport = errors.New("dmarc: no aggregate report in the message")

// xmlFeedback is appendix C's <feedback>, the parts Postmill keeps.
type xmlFeedback struct {
	XMLName  xml.Name `xml:"feedback"`
	Metadata struct {
		OrgName   string `xml:"org_name"`
		Email     string `xml:"email"`
		ReportID  string `xml:"report_id"`
		DateRange struct {
			Begin int64 `xml:"begin"`
			End   int64 `xml:"end"`
		} `xml:"date_range"`
	} `xml:"report_metadata"`
	Policy struct {
		Domain string `xml:"domain"`
		P      string `xml:"p"`
	} `xml:"policy_published"`
	Records []struct {
		Row struct {
			SourceIP        string `xml:"source_ip"`
			Count           int64  `xml:"count"`
			PolicyEvaluated struct {
				Disposition string `xml:"disposition"`
				DKIM        string `xml:"dkim"`
				SPF         string `xml:"spf"`
			} `xml:"policy_evaluated"`
		} `xml:"row"`
		Identifiers struct {
			HeaderFrom string `xml:"header_from"`
		} `xml:"identifiers"`
		AuthResults struct {
			DKIM []struct {
				Result string `xml:"result"`
			} `xml:"dkim"`
			SPF []struct {
				Result string `xml:"result"`
			} `xml:"spf"`
		} `xml:"auth_results"`
	} `xml:"record"`
}

// ParseReport reads one report file: XML, or XML compressed with gzip or in a zip archive.
func ParseReport(data []byte) (ports.DMARCReport, error) {
	x, err := decompress(data)
	if err != nil {
		return ports.DMARCReport{}, err
	}
	var f xmlFeedback
	dec := xml.NewDecoder(bytes.NewReader(x))
	dec.CharsetReader = func(label string, in io.Reader) (io.Reader, error) {
		// Reports are ASCII in practice; a declared Latin-1 or Windows-1252 is read as is.
		return in, nil
	}
	if err := dec.Decode(&f); err != nil {
		return ports.DMARCReport{}, fmt.Errorf("dmarc: report XML: %w", err)
	}
	r := ports.DMARCReport{
		ReporterOrg:   strings.TrimSpace(f.Metadata.OrgName),
		ReporterEmail: strings.TrimSpace(f.Metadata.Email),
		ReportID:      strings.TrimSpace(f.Metadata.ReportID),
		Domain:        strings.ToLower(strings.TrimSuffix(strings.TrimSpace(f.Policy.Domain), ".")),
		Policy:        strings.ToLower(strings.TrimSpace(f.Policy.P)),
		Begin:         time.Unix(f.Metadata.DateRange.Begin, 0).UTC(),
		End:           time.Unix(f.Metadata.DateRange.End, 0).UTC(),
	}
	if r.ReporterOrg == "" || r.ReportID == "" || r.Domain == "" {
		return ports.DMARCReport{}, errors.New("dmarc: report lacks org_name, report_id or policy_published domain")
	}
	if len(f.Records) > MaxRecords {
		return ports.DMARCReport{}, fmt.Errorf("dmarc: report has more than %d records", MaxRecords)
	}
	for _, rec := range f.Records {
		if rec.Row.Count < 0 {
			return ports.DMARCReport{}, errors.New("dmarc: negative count")
		}
		out := ports.DMARCRecord{
			SourceIP:    strings.TrimSpace(rec.Row.SourceIP),
			Count:       rec.Row.Count,
			Disposition: strings.ToLower(strings.TrimSpace(rec.Row.PolicyEvaluated.Disposition)),
			DKIMAligned: strings.EqualFold(strings.TrimSpace(rec.Row.PolicyEvaluated.DKIM), "pass"),
			SPFAligned:  strings.EqualFold(strings.TrimSpace(rec.Row.PolicyEvaluated.SPF), "pass"),
			HeaderFrom:  strings.ToLower(strings.TrimSpace(rec.Identifiers.HeaderFrom)),
			DKIMResult:  "none",
			SPFResult:   "none",
		}
		for _, d := range rec.AuthResults.DKIM {
			out.DKIMResult = strings.ToLower(strings.TrimSpace(d.Result))
			if out.DKIMResult == "pass" {
				break
			}
		}
		if len(rec.AuthResults.SPF) > 0 {
			out.SPFResult = strings.ToLower(strings.TrimSpace(rec.AuthResults.SPF[0].Result))
		}
		r.Records = append(r.Records, out)
	}
	return r, nil
}

// decompress returns the XML of a report file, gunzipping or unzipping it (the first .xml entry) as its
// first bytes say, reading at most MaxXMLBytes.
func decompress(data []byte) ([]byte, error) {
	switch {
	case bytes.HasPrefix(data, []byte{0x1f, 0x8b}):
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("dmarc: gzip: %w", err)
		}
		return readBounded(zr)
	case bytes.HasPrefix(data, []byte("PK\x03\x04")):
		zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return nil, fmt.Errorf("dmarc: zip: %w", err)
		}
		for _, f := range zr.File {
			if !strings.HasSuffix(strings.ToLower(f.Name), ".xml") {
				continue
			}
			rc, err := f.Open()
			if err != nil {
				return nil, fmt.Errorf("dmarc: zip entry: %w", err)
			}
			defer rc.Close()
			return readBounded(rc)
		}
		return nil, errors.New("dmarc: zip holds no .xml file")
	}
	if len(data) > MaxXMLBytes {
		return nil, fmt.Errorf("dmarc: report larger than %d bytes", MaxXMLBytes)
	}
	return data, nil
}

func readBounded(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxXMLBytes+1))
	if err != nil {
		return nil, fmt.Errorf("dmarc: decompress: %w", err)
	}
	if len(b) > MaxXMLBytes {
		return nil, fmt.Errorf("dmarc: report expands past %d bytes", MaxXMLBytes)
	}
	return b, nil
}

// ParseMessage finds the reports in a mail: every part that is XML, gzip or zip (by its content type or file
// name), or the body itself. It fails with ErrNotReport when none parses.
func ParseMessage(raw []byte) ([]ports.DMARCReport, error) {
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotReport, err)
	}
	var reports []ports.DMARCReport
	parts := 0
	var walk func(h mail.Header, body io.Reader, depth int) error
	walk = func(h mail.Header, body io.Reader, depth int) error {
		parts++
		if parts > MaxParts || depth > maxDepth {
			return errors.New("dmarc: too many MIME parts")
		}
		ct, params, _ := mime.ParseMediaType(h.Get("Content-Type"))
		if strings.HasPrefix(ct, "multipart/") {
			mr := multipart.NewReader(body, params["boundary"])
			for {
				p, err := mr.NextPart()
				if err == io.EOF {
					return nil
				}
				if err != nil {
					return fmt.Errorf("dmarc: MIME: %w", err)
				}
				if err := walk(mail.Header(p.Header), p, depth+1); err != nil {
					return err
				}
			}
		}
		var rd io.Reader = body
		switch strings.ToLower(strings.TrimSpace(h.Get("Content-Transfer-Encoding"))) {
		case "base64":
			rd = base64.NewDecoder(base64.StdEncoding, &stripSpace{r: body})
		case "quoted-printable":
			rd = quotedprintable.NewReader(body)
		}
		data, err := io.ReadAll(io.LimitReader(rd, MaxXMLBytes+1))
		if err != nil {
			return nil // an undecodable part is not a report
		}
		if r, err := ParseReport(data); err == nil {
			reports = append(reports, r)
		}
		return nil
	}
	if err := walk(msg.Header, msg.Body, 0); err != nil {
		return nil, err
	}
	if len(reports) == 0 {
		return nil, ErrNotReport
	}
	return reports, nil
}

// stripSpace drops the line breaks and spaces of a base64 body.
type stripSpace struct{ r io.Reader }

func (s *stripSpace) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	j := 0
	for _, c := range p[:n] {
		if c != '\r' && c != '\n' && c != ' ' && c != '\t' {
			p[j] = c
			j++
		}
	}
	return j, err
}
