package react

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/dop251/goja"
	"github.com/dop251/goja/parser"
	"github.com/evanw/esbuild/pkg/api"
)

// templateFile names the source in compile errors and stack positions.
const templateFile = "template.tsx"

// maxCompileErrors is how many esbuild errors a compile error message lists; the first usually explains
// the rest.
const maxCompileErrors = 5

// transform compiles TSX to a CommonJS script for goja: JSX with React's automatic runtime (so templates
// need not import React; react/jsx-runtime is one of the modules require knows), TypeScript types
// stripped (not checked), syntax newer than ES2017 lowered, and an inline source map so that a runtime
// error points into the template as written.
func transform(source string) (string, error) {
	res := api.Transform(source, api.TransformOptions{
		Loader:          api.LoaderTSX,
		Format:          api.FormatCommonJS,
		Target:          api.ES2017,
		JSX:             api.JSXAutomatic,
		JSXImportSource: "react",
		Sourcefile:      templateFile,
		Sourcemap:       api.SourceMapInline,
		Charset:         api.CharsetUTF8,
		LogLevel:        api.LogLevelSilent,
	})
	if len(res.Errors) > 0 {
		msgs := make([]string, 0, maxCompileErrors)
		for i, m := range res.Errors {
			if i == maxCompileErrors {
				msgs = append(msgs, fmt.Sprintf("and %d more", len(res.Errors)-i))
				break
			}
			msgs = append(msgs, formatMessage(m))
		}
		return "", invalid("%s", strings.Join(msgs, "; "))
	}
	return string(res.Code), nil
}

// formatMessage writes an esbuild message as "template.tsx:3:14: text", with a 1-based column counted in
// characters (esbuild's own is 0-based, in bytes).
func formatMessage(m api.Message) string {
	if m.Location == nil {
		return m.Text
	}
	col := m.Location.Column
	if col <= len(m.Location.LineText) {
		col = utf8.RuneCountInString(m.Location.LineText[:col])
	}
	return fmt.Sprintf("%s:%d:%d: %s", templateFile, m.Location.Line, col+1, m.Text)
}

// compile turns TSX source into a goja program.
func compile(source string) (*goja.Program, error) {
	code, err := transform(source)
	if err != nil {
		return nil, err
	}
	return compileTemplate(code)
}

// errNoSourceMapFiles keeps the parser from reading a source map named by a sourceMappingURL comment: the
// only map a template has is the inline one transform writes.
var errNoSourceMapFiles = errors.New("source maps are read only inline")

// compileTemplate compiles transform's output. esbuild has already parsed the source, so an error here is a
// construct goja does not implement.
func compileTemplate(code string) (*goja.Program, error) {
	ast, err := goja.Parse(templateFile, code, parser.WithSourceMapLoader(func(string) ([]byte, error) {
		return nil, errNoSourceMapFiles
	}))
	if err == nil {
		var prog *goja.Program
		if prog, err = goja.CompileAST(ast, false); err == nil {
			return prog, nil
		}
	}
	return nil, invalid("%v", err)
}
