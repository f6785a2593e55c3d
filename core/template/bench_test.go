package template

import (
	"os"
	"strings"
	"testing"
)

// receiptHTML is a realistic transactional email: about 10 KB of table layout, inline styles and Outlook
// conditional comments with a dozen placeholders.
func receiptHTML(tb testing.TB) string {
	tb.Helper()
	b, err := os.ReadFile("testdata/receipt.html")
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

func receiptVars() map[string]any {
	return map[string]any{
		"company": map[string]any{"name": "Example"},
		"user":    map[string]any{"firstName": "Ada", "email": "ada@example.com"},
		"order": map[string]any{
			"number": "A-10482", "date": "2026-03-14", "total": 111.89, "currency": "USD",
		},
		"links": map[string]any{
			"invoice":     "https://www.example.com/invoices/A-10482?token=3f9a1c",
			"unsubscribe": "https://www.example.com/u/3f9a1c",
		},
	}
}

func TestReceiptRenders(t *testing.T) {
	t.Parallel()
	c := mustCompile(t, receiptHTML(t), HTML)
	out := c.Render(receiptVars())
	for _, want := range []string{
		"<title>Your receipt from Example</title>",
		"Thanks for your purchase, Ada!",
		`href="https://www.example.com/invoices/A-10482?token=3f9a1c"`,
		`<!--[if mso]>` + "\n" + `            <v:roundrect`,
		"111.89 USD",
		"sent to ada@example.com.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("rendered receipt lacks %q", want)
		}
	}
	if strings.Contains(out, "{{") {
		t.Error("rendered receipt still holds a placeholder")
	}
	if n := len(c.Placeholders()); n != 12 {
		t.Errorf("receipt has %d placeholders, want 12", n)
	}
}

func BenchmarkCompile(b *testing.B) {
	src := receiptHTML(b)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(src, HTML); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRender(b *testing.B) {
	c := mustCompile(b, receiptHTML(b), HTML)
	vars := receiptVars()
	b.ReportAllocs()
	for b.Loop() {
		_ = c.Render(vars)
	}
}

func BenchmarkRenderParallel(b *testing.B) {
	c := mustCompile(b, receiptHTML(b), HTML)
	vars := receiptVars()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = c.Render(vars)
		}
	})
}
