package scan

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/postmill/postmill/ports"
)

// pe builds the smallest content that carries a PE signature at e_lfanew.
func pe(lfanew uint32, size int) []byte {
	b := make([]byte, size)
	copy(b, "MZ")
	binary.LittleEndian.PutUint32(b[0x3c:], lfanew)
	if int(lfanew)+4 <= size {
		copy(b[lfanew:], "PE\x00\x00")
	}
	return b
}

func withWord(magic string, word uint32, order binary.ByteOrder) []byte {
	b := append([]byte(magic), make([]byte, 60)...)
	order.PutUint32(b[4:], word)
	return b
}

func TestScan(t *testing.T) {
	t.Parallel()
	eicarBytes := []byte(eicar)
	padded := func(trailer string) []byte { return append(bytes.Clone(eicarBytes), trailer...) }
	longWhitespace := padded(strings.Repeat(" ", eicarMaxLen-len(eicar)))

	for _, tc := range []struct {
		name        string
		filename    string
		contentType string
		data        []byte
		want        string // "" = clean
	}{
		// EICAR, per its definition.
		{"eicar exact", "eicar.txt", "text/plain", eicarBytes, SignatureEICAR},
		{"eicar with CRLF", "eicar.txt", "text/plain", padded("\r\n"), SignatureEICAR},
		{"eicar with every allowed whitespace", "e", "", padded(" \t\r\n\x1a"), SignatureEICAR},
		{"eicar padded to exactly 128 bytes", "e", "", longWhitespace, SignatureEICAR},
		{"eicar named .com reports EICAR first", "eicar.com", "application/octet-stream", eicarBytes, SignatureEICAR},
		{"eicar padded beyond 128 bytes", "e", "", append(bytes.Clone(longWhitespace), ' '), ""},
		{"eicar followed by text", "e", "", padded(" and more"), ""},
		{"eicar not at the start", "e", "", append([]byte(" "), eicarBytes...), ""},
		{"eicar truncated", "e", "", eicarBytes[:67], ""},

		// Executable content, whatever the name and type claim.
		{"PE", "photo.jpg", "image/jpeg", pe(0x80, 0x200), SignaturePE},
		{"PE signature at the very end", "a", "", pe(0x40, 0x44), SignaturePE},
		{"MZ without PE signature", "notes.txt", "text/plain", []byte("MZ is the code of Mozambique, and this line is long enough to have a 0x3c word."), ""},
		{"MZ with e_lfanew beyond the end", "a", "", pe(0x1000, 0x100), ""},
		{"MZ with e_lfanew inside the DOS header", "a", "", pe(0x3c, 0x100), ""},
		{"ELF", "data.bin", "application/octet-stream", []byte("\x7fELF\x02\x01\x01\x00"), SignatureELF},
		{"Mach-O 32 big-endian", "a", "", []byte("\xfe\xed\xfa\xce\x00\x00\x00\x07"), SignatureMachO},
		{"Mach-O 64 big-endian", "a", "", []byte("\xfe\xed\xfa\xcf\x00\x00\x00\x07"), SignatureMachO},
		{"Mach-O 32 little-endian", "a", "", []byte("\xce\xfa\xed\xfe\x07\x00\x00\x00"), SignatureMachO},
		{"Mach-O 64 little-endian", "a", "", []byte("\xcf\xfa\xed\xfe\x07\x00\x00\x01"), SignatureMachO},
		{"universal binary", "a", "", withWord("\xca\xfe\xba\xbe", 2, binary.BigEndian), SignatureMachO},
		{"universal binary 64", "a", "", withWord("\xca\xfe\xba\xbf", 3, binary.BigEndian), SignatureMachO},
		{"universal binary byte-swapped", "a", "", withWord("\xbe\xba\xfe\xca", 2, binary.LittleEndian), SignatureMachO},
		{"universal binary 64 byte-swapped", "a", "", withWord("\xbf\xba\xfe\xca", 2, binary.LittleEndian), SignatureMachO},
		{"Java class file (Java 8, version 52)", "a", "", withWord("\xca\xfe\xba\xbe", 52, binary.BigEndian), SignatureJava},
		{"CAFEBABE with no architectures", "a", "", withWord("\xca\xfe\xba\xbe", 0, binary.BigEndian), ""},
		{"shebang", "run.txt", "text/plain", []byte("#!/bin/sh\nrm -rf ~\n"), SignatureScript},
		{"shebang via env", "a", "", []byte("#!/usr/bin/env python3\n"), SignatureScript},
		{"hash without bang", "a.txt", "text/plain", []byte("# heading\n"), ""},

		// Declared content types.
		{"x-msdownload", "a", "application/x-msdownload", []byte("x"), SignaturePE},
		{"x-dosexec with parameters and case", "a", "Application/X-DOSEXEC; name=a", []byte("x"), SignaturePE},
		{"java archive", "a", "application/java-archive", []byte("PK\x03\x04"), SignatureJava},
		{"shell script type", "a", "application/x-sh", []byte("echo"), SignatureScript},
		{"msi type", "a", "application/x-msi", []byte("x"), SignatureInstaller},
		{"unparsable type still compared", "a", "application/x-msdownload;;;", []byte("x"), SignaturePE},
		{"plain text type", "a", "text/plain; charset=utf-8", []byte("hello"), ""},

		// Filename extensions.
		{".exe", "invoice.exe", "application/pdf", []byte("%PDF-1.7"), SignaturePE},
		{".EXE upper case", "INVOICE.EXE", "", []byte("x"), SignaturePE},
		{".exe with trailing dot and space", "invoice.exe. ", "", []byte("x"), SignaturePE},
		{".dll", "a.dll", "", []byte("x"), SignaturePE},
		{".scr", "a.scr", "", []byte("x"), SignaturePE},
		{".com", "a.com", "", []byte("x"), SignaturePE},
		{".bat in a Windows path", `C:\Users\x\run.bat`, "", []byte("x"), SignatureScript},
		{".cmd", "a.cmd", "", []byte("x"), SignatureScript},
		{".ps1", "a.ps1", "", []byte("x"), SignatureScript},
		{".vbs", "a.vbs", "", []byte("x"), SignatureScript},
		{".js", "a.js", "", []byte("x"), SignatureScript},
		{".sh", "a.sh", "", []byte("x"), SignatureScript},
		{".jar", "a.jar", "", []byte("x"), SignatureJava},
		{".msi", "a.msi", "", []byte("x"), SignatureInstaller},
		{".json is not .js", "a.json", "application/json", []byte("{}"), ""},
		{".exe only inside the name", "a.exe.pdf", "application/pdf", []byte("%PDF"), ""},
		{"no extension", "README", "", []byte("read me"), ""},
		{"a directory named .exe", "x.exe/readme.txt", "", []byte("x"), ""},

		// Ordinary attachments.
		{"pdf", "report.pdf", "application/pdf", []byte("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n"), ""},
		{"png", "logo.png", "image/png", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), ""},
		{"zip is not opened", "files.zip", "application/zip", []byte("PK\x03\x04\x14\x00"), ""},
		{"empty", "empty.txt", "text/plain", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, err := Builtin{}.Scan(context.Background(), tc.filename, tc.contentType, tc.data)
			if err != nil {
				t.Fatalf("Scan: %v", err)
			}
			want := ports.ScanVerdict{Clean: tc.want == "", Signature: tc.want}
			if v != want {
				t.Fatalf("Scan(%q, %q, %d bytes) = %+v, want %+v", tc.filename, tc.contentType, len(tc.data), v, want)
			}
		})
	}
}

// TestScanRefusesARealExecutable feeds the scanner the test binary itself: a real PE, ELF or Mach-O file
// depending on the platform, not a hand-made header.
func TestScanRefusesARealExecutable(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"windows": SignaturePE, "darwin": SignatureMachO}[runtime.GOOS]
	if want == "" {
		want = SignatureELF
	}
	v, err := Builtin{}.Scan(context.Background(), "harmless.txt", "text/plain", data)
	if err != nil {
		t.Fatal(err)
	}
	if v.Clean || v.Signature != want {
		t.Fatalf("Scan(the test binary) = %+v, want signature %s", v, want)
	}
}

func TestScanHonoursContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (Builtin{}).Scan(ctx, "a.txt", "text/plain", []byte("x")); err == nil {
		t.Fatal("Scan with an ended context returned no error")
	}
}
