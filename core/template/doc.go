// Package template holds Postmill's email templates (SPEC §4.4): the interpolation engine that renders a
// version's subject, HTML and text with a send's variables, and the use cases that create, version and
// publish templates. The engine is pure: Compile analyses a template once, Render is string concatenation.
//
// # Placeholders
//
// A placeholder opens at "{{" and closes at the first "}}" after it; "{{{" closes at the first "}}}" after it
// (the triple-brace form some template languages use for unescaped output). Inside the braces, optional ASCII
// whitespace surrounds a bare dotted identifier:
//
//	identifier = segment *( "." segment )
//	segment    = ( ALPHA / "_" ) *( ALPHA / DIGIT / "_" )      ; ASCII only
//
// Anything else inside the braces (an expression, a call, a filter, a triple-brace form, an empty pair)
// renders as the empty string, so a template written for another engine never leaks its syntax to
// recipients. A "{{" with no "}}" after it is literal text; there is no escape for a literal "{{" (write
// "&#123;&#123;" in HTML).
//
// An identifier resolves against the send's variables, a JSON object: each segment looks up a key of a
// nested object (a key containing a dot cannot be reached). Strings render as themselves, numbers the way
// JavaScript prints them (3, not 3.0; 1e+21 from 1e21 on), booleans as true or false. A missing variable,
// null, an array, an object and any other Go type render empty.
//
// # Escaping
//
// Every substituted value is HTML-escaped (&, <, >, " and ' become entities, as html.EscapeString does),
// in the subject and the text part too: SPEC §4.4 asks for it without exception, so a text part shows
// "&amp;" where a value held "&". In a subject a value's CR and LF become spaces: a header field cannot carry
// them (RFC 5322 §2.2). A dangerous URL scheme in the subject or the text part is left alone: those parts
// have no links to follow; scheme rules apply to URL attributes.
//
// # HTML
//
// Compile tokenizes the HTML once, the way the HTML tokenizer (WHATWG HTML §13.2.5) does, with every
// placeholder standing in as one opaque character, and decides what each placeholder may become:
//
//   - In text (including <title>, <textarea>, <script> and <style> content) and in attribute values it is
//     substituted, escaped. Escaping does not make a value safe inside JavaScript or CSS: email clients run
//     neither, and Postmill's guarantee is about markup and URLs.
//   - In a comment it is substituted with "-" and "!" escaped as well, so a value can never end the comment.
//     Content of comments, Outlook's conditional comments included, is not analysed further.
//   - An attribute value that is not quoted is quoted when it holds a placeholder, so a value with spaces
//     cannot add attributes and an empty one cannot swallow the next attribute.
//   - Anywhere else (a tag or attribute name, between attributes, an end tag, a doctype, a bogus comment, an
//     srcdoc attribute whose value is a whole document) it renders empty, and so does a placeholder whose
//     value, or whose absence, could change the markup around it: right after a "<" in text, inside a
//     would-be end tag of a <title>, <script> or <style>, or next to "-", "!" or ">" in a comment. The
//     template is then analysed again as if the placeholder were not there, so the analysis always describes
//     what Render writes.
//
// URL attributes (href and any *:href, src, action, formaction, background, poster, cite, longdesc, data,
// codebase, classid, manifest, profile, icon, lowsrc, dynsrc, xml:base, SVG's to, from, by and values, and
// the lists srcset, imagesrcset, ping and archive and a <meta>'s content, whose every item is checked) lose
// their value when it starts with javascript:, vbscript: or a data: URL that is not a raster image
// (data:image/png, gif, jpeg, jpg, webp, bmp, avif or x-icon; SVG can carry script), judged after decoding
// character references and removing ASCII whitespace and control characters, case-insensitively. Literal
// values are judged at Compile; values that hold placeholders are judged by Render after substitution, so
// "java&#x73;cript:" built from pieces is caught as well.
//
// An unterminated tag at the end of the HTML is dropped, as a browser drops it, so nothing appended to the
// rendered HTML later (an open-tracking pixel) can end up inside it.
//
// Compile refuses the few constructs whose tokenization depends on the tree the browser builds rather than
// on the tokenizer alone: after an <svg>, <math>, <select> or <frameset> tag, a raw-text element (<style>,
// <script>, <title>, ...) whose content holds a "<", and a "<![CDATA[" whose first ">" does not end "]]>".
package template
