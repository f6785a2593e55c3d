// Package scan is Postmill's builtin ports.Scanner: pure checks, no I/O and no signature database, so that
// every deployment refuses the two things an email platform must never carry even without a clamd — the
// EICAR test file (which is how operators check that scanning is switched on) and executable content.
//
// What it refuses, in the order it checks (the first match is the verdict):
//
//	Eicar-Test-Signature   the EICAR anti-malware test file: the 68-byte EICAR string at the start, followed
//	                       only by space, tab, CR, LF or Ctrl-Z, 128 bytes in all (the EICAR definition)
//	Executable.PE          "MZ" with e_lfanew (offset 0x3C) pointing at "PE\0\0" inside the content
//	Executable.ELF         0x7F "ELF"
//	Executable.MachO       Mach-O 32/64-bit in either byte order (FEEDFACE, FEEDFACF, CEFAEDFE, CFFAEDFE) and
//	                       universal binaries (CAFEBABE, CAFEBABF and their byte swaps) with a plausible
//	                       architecture count
//	Executable.Java        a Java class file (CAFEBABE followed by a class-file version)
//	Executable.Script      "#!" at the start (a script naming its interpreter)
//	by declared content type: application/x-msdownload, application/x-dosexec, application/x-msdos-program,
//	                       application/vnd.microsoft.portable-executable → Executable.PE;
//	                       application/x-executable, application/x-elf → Executable.ELF;
//	                       application/x-mach-binary → Executable.MachO;
//	                       application/java-archive, application/x-java-archive → Executable.Java;
//	                       application/x-msi, application/x-ms-installer → Executable.Installer;
//	                       application/x-sh, application/x-shellscript, application/x-bat,
//	                       application/x-msdos-batch → Executable.Script
//	by filename extension (case-insensitive, after the trailing dots and spaces Windows ignores):
//	                       .exe .dll .scr .com → Executable.PE; .jar → Executable.Java;
//	                       .msi → Executable.Installer; .bat .cmd .ps1 .vbs .js .sh → Executable.Script
//
// Archives are not opened: an executable inside a ZIP passes this scanner (use clamd for that).
package scan

import (
	"bytes"
	"context"
	"encoding/binary"
	"mime"
	"path"
	"strings"

	"github.com/postmill/postmill/ports"
)

// Signatures the builtin scanner reports. They name what was found the way a malware scanner does, so that
// the 400 `attachment <filename> rejected: <signature>` reads the same whichever scanner is configured.
const (
	SignatureEICAR     = "Eicar-Test-Signature"
	SignaturePE        = "Executable.PE"
	SignatureELF       = "Executable.ELF"
	SignatureMachO     = "Executable.MachO"
	SignatureJava      = "Executable.Java"
	SignatureInstaller = "Executable.Installer"
	SignatureScript    = "Executable.Script"
)

const (
	eicar                     = `X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*`
	eicarMaxLen               = 128
	maxFatArchitectures       = 30 // real universal binaries hold a handful; Java class versions start at 45
	firstJavaClassFileVersion = 45
)

// Builtin is the default ports.Scanner. The zero value is ready to use and safe for concurrent use.
type Builtin struct{}

var _ ports.Scanner = Builtin{}

// Scan returns a verdict that is not clean when data is the EICAR test file or executable content, judged by
// the bytes first, then by the declared content type and the filename. It fails only when ctx has ended.
func (Builtin) Scan(ctx context.Context, filename, contentType string, data []byte) (ports.ScanVerdict, error) {
	if err := ctx.Err(); err != nil {
		return ports.ScanVerdict{}, err
	}
	for _, check := range []func() string{
		func() string { return byContent(data) },
		func() string { return byContentType(contentType) },
		func() string { return byExtension(filename) },
	} {
		if sig := check(); sig != "" {
			return ports.ScanVerdict{Signature: sig}, nil
		}
	}
	return ports.ScanVerdict{Clean: true}, nil
}

// isEICAR follows the EICAR definition: the file starts with the 68-character string, which "may be
// optionally appended by any combination of whitespace characters with the total file length not exceeding
// 128 characters"; the whitespace allowed is space, tab, LF, CR and Ctrl-Z.
func isEICAR(data []byte) bool {
	if len(data) > eicarMaxLen || !bytes.HasPrefix(data, []byte(eicar)) {
		return false
	}
	for _, c := range data[len(eicar):] {
		switch c {
		case ' ', '\t', '\n', '\r', 0x1a:
		default:
			return false
		}
	}
	return true
}

func byContent(data []byte) string {
	switch {
	case isEICAR(data):
		return SignatureEICAR
	case isPE(data):
		return SignaturePE
	case bytes.HasPrefix(data, []byte("\x7fELF")):
		return SignatureELF
	case len(data) >= 4 && isMachOThin(data[:4]):
		return SignatureMachO
	case len(data) >= 8 && isFatOrClass(data[:4]):
		// CAFEBABE is both a universal binary and a Java class file: a universal binary's next word counts
		// architectures (a handful), a class file's holds its version (45 and up). A byte-swapped magic is
		// only ever a universal binary.
		n := binary.BigEndian.Uint32(data[4:8])
		if data[0] == 0xca && n >= firstJavaClassFileVersion {
			return SignatureJava
		}
		if data[0] != 0xca {
			n = binary.LittleEndian.Uint32(data[4:8])
		}
		if n >= 1 && n <= maxFatArchitectures {
			return SignatureMachO
		}
	case bytes.HasPrefix(data, []byte("#!")):
		return SignatureScript
	}
	return ""
}

// isPE checks the MS-DOS stub's e_lfanew (little-endian uint32 at 0x3C) for the "PE\0\0" signature of the
// Microsoft PE format, so that a text that merely begins with "MZ" is not refused.
func isPE(data []byte) bool {
	if len(data) < 0x40 || data[0] != 'M' || data[1] != 'Z' {
		return false
	}
	off := uint64(binary.LittleEndian.Uint32(data[0x3c:0x40]))
	return off >= 0x40 && off+4 <= uint64(len(data)) && bytes.Equal(data[off:off+4], []byte("PE\x00\x00"))
}

func isMachOThin(magic []byte) bool {
	switch string(magic) {
	case "\xfe\xed\xfa\xce", "\xfe\xed\xfa\xcf", "\xce\xfa\xed\xfe", "\xcf\xfa\xed\xfe":
		return true
	}
	return false
}

func isFatOrClass(magic []byte) bool {
	switch string(magic) {
	case "\xca\xfe\xba\xbe", "\xca\xfe\xba\xbf", "\xbe\xba\xfe\xca", "\xbf\xba\xfe\xca":
		return true
	}
	return false
}

var contentTypes = map[string]string{
	"application/x-msdownload":                      SignaturePE,
	"application/x-dosexec":                         SignaturePE,
	"application/x-msdos-program":                   SignaturePE,
	"application/vnd.microsoft.portable-executable": SignaturePE,
	"application/x-executable":                      SignatureELF,
	"application/x-elf":                             SignatureELF,
	"application/x-mach-binary":                     SignatureMachO,
	"application/java-archive":                      SignatureJava,
	"application/x-java-archive":                    SignatureJava,
	"application/x-msi":                             SignatureInstaller,
	"application/x-ms-installer":                    SignatureInstaller,
	"application/x-sh":                              SignatureScript,
	"application/x-shellscript":                     SignatureScript,
	"application/x-bat":                             SignatureScript,
	"application/x-msdos-batch":                     SignatureScript,
}

// byContentType looks at the media type only: parameters (charset=...) and case do not matter. A value that
// does not parse is compared as it is, lower-cased, up to its first ';'.
func byContentType(contentType string) string {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt, _, _ = strings.Cut(contentType, ";")
		mt = strings.ToLower(strings.TrimSpace(mt))
	}
	return contentTypes[mt]
}

var extensions = map[string]string{
	".exe": SignaturePE, ".dll": SignaturePE, ".scr": SignaturePE, ".com": SignaturePE,
	".jar": SignatureJava,
	".msi": SignatureInstaller,
	".bat": SignatureScript, ".cmd": SignatureScript, ".ps1": SignatureScript, ".vbs": SignatureScript,
	".js": SignatureScript, ".sh": SignatureScript,
}

// byExtension trims the trailing dots and spaces that Windows drops when it opens a file ("invoice.exe. "
// runs as invoice.exe) and takes the last extension, case-insensitively.
func byExtension(filename string) string {
	name := strings.TrimRight(filename, ". ")
	// Both separators: a filename may come from any client's path.
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	return extensions[strings.ToLower(path.Ext(name))]
}
