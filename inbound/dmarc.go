package inbound

import (
	"context"
	"log/slog"
	"strings"
)

// isDMARCAddress reports whether to is the DMARC aggregate report mailbox (compared without case).
func (s *session) isDMARCAddress(to string) bool {
	a := s.srv.cfg.DMARCAddress
	return a != "" && s.srv.cfg.DMARC != nil && strings.EqualFold(strings.Trim(to, "<>"), a)
}

// receiveDMARC hands a mail sent to the report mailbox to the core. Mail that holds no report is taken and
// dropped, like other mail that reports nothing, so a reporter's odd message never bounces back to it; a
// failure of the core answers 451 so the reporter retries. A nil error with no other recipient is the
// 250 the caller answers.
func (s *session) receiveDMARC(ctx context.Context, raw []byte) error {
	n, err := s.srv.cfg.DMARC.IngestDMARCReport(ctx, raw)
	switch classify(err) {
	case outcomeRecorded:
		s.log(ctx, slog.LevelInfo, "dmarc report received", slog.Int("stored", n), slog.Int("bytes", len(raw)))
	case outcomePermanent:
		s.log(ctx, slog.LevelInfo, "dmarc mail dropped: no aggregate report", slog.String("error", err.Error()))
	default:
		s.log(ctx, slog.LevelError, "dmarc report not stored", slog.String("error", err.Error()))
		return errTemporary
	}
	if len(s.mail)+len(s.rcpts) == 0 {
		return accepted("dmarc report accepted")
	}
	return nil
}
