package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// audienceRow is one contact of the audiences the import benchmarks load, the same rows for Postmill and
// listmonk: an address on one of the recipient domains, a name and three properties.
type audienceRow struct {
	email, first, last, plan, city string
	score                          int
}

func audienceMember(i, domains int) audienceRow {
	return audienceRow{email: fmt.Sprintf("reader%06d@rcpt%d.example", i, i%domains), first: fmt.Sprintf("Firstname%d", i),
		last: fmt.Sprintf("Lastname%d", i), plan: []string{"free", "pro", "team"}[i%3], city: fmt.Sprintf("City number %d", i%500), score: i % 1000}
}

// runImport times Postmill's contact import with the rows the listmonk benchmark imports: CSVs of
// -import-rows through POST /v1/contacts/import, one after another, until -contacts exist; the first
// import alone gives the rows/s of one 10,000-row CSV.
func runImport(args []string) error {
	fs := flag.NewFlagSet("import", flag.ExitOnError)
	bin := fs.String("bin", "bin/postmill", "postmill binary")
	db := fs.String("db", "", "PostgreSQL URL (its public schema is reset)")
	contacts := fs.Int("contacts", 100000, "contacts, loaded by imports of -import-rows each")
	domains := fs.Int("domains", 20, "recipient domains the contacts are spread over")
	importRows := fs.Int("import-rows", 10000, "rows of each CSV import")
	_ = fs.Parse(args)
	ctx := context.Background()
	if err := resetDatabase(ctx, *db); err != nil {
		return err
	}
	z, err := startZone()
	if err != nil {
		return err
	}
	p, err := startPlatform(platformOpts{bin: *bin, db: *db, targets: "all", zone: z})
	if err != nil {
		return err
	}
	defer p.stop()
	if err := p.setup(z); err != nil {
		return err
	}
	pid := p.cmd.Process.Pid
	imports := (*contacts + *importRows - 1) / *importRows
	var first, all time.Duration
	var csvBytes int
	var peak int64
	for i := range imports {
		var doc strings.Builder
		doc.WriteString("email,first_name,last_name,plan,city,score\n")
		for j := i * *importRows; j < min((i+1)**importRows, *contacts); j++ {
			r := audienceMember(j, *domains)
			fmt.Fprintf(&doc, "%s,%s,%s,%s,%s,%d\n", r.email, r.first, r.last, r.plan, r.city, r.score)
		}
		if i == 0 {
			csvBytes = doc.Len()
		}
		body, _ := json.Marshal(map[string]any{"csv": doc.String()})
		req, _ := http.NewRequest("POST", p.base+"/v1/contacts/import", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+p.key)
		start := time.Now()
		res, err := p.client.Do(req)
		if err != nil {
			return err
		}
		answer, _ := io.ReadAll(res.Body)
		res.Body.Close()
		d := time.Since(start)
		if res.StatusCode != 200 {
			return fmt.Errorf("import %d: %d %s", i, res.StatusCode, answer)
		}
		if i == 0 {
			first = d
		}
		all += d
		peak = max(peak, rssKB(pid))
	}
	conn, err := connect(ctx, *db)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM contacts`).Scan(&n); err != nil {
		return err
	}
	if n != *contacts {
		return fmt.Errorf("the imports left %d contacts, want %d", n, *contacts)
	}
	p.reportLogs()
	fmt.Printf("import: %s; %d rows (%d bytes of CSV) in %s = %.0f rows/s; %d contacts by %d imports in %s; RSS after the imports %d MiB\n",
		machine(), min(*importRows, *contacts), csvBytes, first.Round(time.Millisecond), float64(min(*importRows, *contacts))/first.Seconds(),
		n, imports, all.Round(time.Millisecond), peak/1024)
	fmt.Printf("summary: postmill import %.0f rows/s, %d by %d imports in %s\n",
		float64(min(*importRows, *contacts))/first.Seconds(), n, imports, all.Round(time.Millisecond))
	return nil
}
