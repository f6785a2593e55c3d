package bounceclass

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"

	"github.com/postmill/postmill/ports"
)

// rule is one line of a classification table.
type rule struct {
	class string
	// code is what the rule matches besides text: in statusRules an enhanced code, "x.1.1" for either class
	// (4 or 5) or "5.7.28" for one; in subjectRules a subject, "x.4"; in codeRules a reply code, "552", or a
	// class, "5".
	code string
	// only limits a text rule to replies of class '4' or '5'; 0 takes both.
	only byte
	// text is a regular expression the reply's words must match, written in lower case: the words are
	// lower-cased before matching (cheaper than a case-insensitive expression). "" matches any words.
	text string
}

// statusRules are tier 1 of Classify: enhanced codes that mean one thing (RFC 3463 §3, the IANA registry of
// RFC 5248, RFC 7293, RFC 7372, RFC 7505, and Gmail's documented 4.7.28 and 5.7.28). A code missing here
// (X.0.0, X.1.0, X.5.0, X.7.0, X.7.1, X.7.9, ...) is used by providers for too many things to decide by; the
// words do.
var statusRules = []rule{
	// Exchange Online answers an address its directory does not know with 550 5.4.1 "Recipient address
	// rejected: Access denied" and 550 5.1.10 "RESOLVER.ADR.RecipientNotFound"; RFC 7505 gives X.1.10 to a
	// null MX, which is what Postmill's own MTA reports.
	{class: ports.BounceClassBadMailbox, code: "x.4.1", text: `recipient address rejected|access denied`},
	{class: ports.BounceClassBadDomain, code: "x.1.10", text: `null mx`},
	{class: ports.BounceClassBadMailbox, code: "x.1.10", text: `recipient ?not ?found`},

	{class: ports.BounceClassBadMailbox, code: "x.1.1"},       // bad destination mailbox address
	{class: ports.BounceClassBadDomain, code: "x.1.2"},        // bad destination system address
	{class: ports.BounceClassBadMailbox, code: "x.1.3"},       // bad destination mailbox address syntax
	{class: ports.BounceClassBadMailbox, code: "x.1.6"},       // mailbox has moved, no forwarding address
	{class: ports.BounceClassPolicyBlock, code: "x.1.7"},      // bad sender's mailbox address syntax
	{class: ports.BounceClassPolicyBlock, code: "x.1.8"},      // bad sender's system address
	{class: ports.BounceClassInactiveMailbox, code: "5.2.1"},  // mailbox disabled (Gmail's 4.2.1 is throttling)
	{class: ports.BounceClassMailboxFull, code: "x.2.2"},      // mailbox full
	{class: ports.BounceClassMessageTooLarge, code: "x.2.3"},  // message length exceeds administrative limit
	{class: ports.BounceClassMessageTooLarge, code: "x.3.4"},  // message too big for system
	{class: ports.BounceClassRouting, code: "x.4.1"},          // no answer from host
	{class: ports.BounceClassRouting, code: "x.4.2"},          // bad connection
	{class: ports.BounceClassRouting, code: "x.4.3"},          // directory server failure
	{class: ports.BounceClassRouting, code: "x.4.4"},          // unable to route
	{class: ports.BounceClassRouting, code: "x.4.6"},          // routing loop detected
	{class: ports.BounceClassRouting, code: "x.4.7"},          // delivery time expired
	{class: ports.BounceClassProtocol, code: "x.5.1"},         // invalid command
	{class: ports.BounceClassProtocol, code: "x.5.2"},         // syntax error
	{class: ports.BounceClassRateLimited, code: "x.5.3"},      // too many recipients
	{class: ports.BounceClassProtocol, code: "x.5.4"},         // invalid command arguments
	{class: ports.BounceClassProtocol, code: "x.5.5"},         // wrong protocol version
	{class: ports.BounceClassProtocol, code: "x.6.7"},         // non-ASCII addresses not permitted (RFC 6531)
	{class: ports.BounceClassProtocol, code: "x.6.8"},         // UTF-8 string reply is required (RFC 6531)
	{class: ports.BounceClassProtocol, code: "x.6.9"},         // UTF-8 header message cannot be transferred
	{class: ports.BounceClassInactiveMailbox, code: "x.7.13"}, // user account disabled
	{class: ports.BounceClassInactiveMailbox, code: "x.7.17"}, // mailbox owner has changed (RFC 7293)
	{class: ports.BounceClassBadDomain, code: "x.7.18"},       // domain owner has changed (RFC 7293)
	{class: ports.BounceClassAuthentication, code: "x.7.20"},  // no passing DKIM signature found (RFC 7372)
	{class: ports.BounceClassAuthentication, code: "x.7.21"},  // no acceptable DKIM signature found
	{class: ports.BounceClassAuthentication, code: "x.7.22"},  // no valid author-matched DKIM signature
	{class: ports.BounceClassAuthentication, code: "x.7.23"},  // SPF validation failed
	{class: ports.BounceClassAuthentication, code: "x.7.24"},  // SPF validation error
	{class: ports.BounceClassAuthentication, code: "x.7.25"},  // reverse DNS validation failed
	{class: ports.BounceClassAuthentication, code: "x.7.26"},  // multiple authentication checks failed
	{class: ports.BounceClassAuthentication, code: "x.7.27"},  // sender address has null MX (RFC 7505)
	{class: ports.BounceClassRateLimited, code: "4.7.28"},     // Gmail: unsolicited mail, rate limited
	{class: ports.BounceClassSpamBlock, code: "5.7.28"},       // Gmail: unsolicited mail, blocked
}

// textRules are tier 2 of Classify, tried in order: the first whose expression matches decides, so a more
// specific rule stands before a broader one (a sender refusal before an unknown domain, since Postfix says
// "Sender address rejected: Domain not found"; throttling before spam, since Yahoo's TSS04 deferral speaks of
// complaints; the broad policy words and the temporary failures last).
var textRules = []rule{
	{class: ports.BounceClassRelayDenied, text: `relay(ing)? (access )?(is )?(denied|not permitted|not allowed|prohibited|refused)|` +
		`not (permitted|allowed|authori[sz]ed) to relay|unable to relay|we do not relay|allowed rcpthosts`},
	{class: ports.BounceClassAuthentication, text: `unauthenticated|not authenticated|authentication (information|checks?|failed|failure)|` +
		`fails? to pass authentication|\b(spf|dkim|dmarc)\b|sender policy framework|reverse (dns|hostname|lookup)|` +
		`ptr record|cannot find your (reverse )?hostname|(isn't|is not|not) aligned`},
	{class: ports.BounceClassPolicyBlock, text: `sender (address )?(rejected|denied|blocked|refused)|sender verif(y|ication) failed|` +
		`bad (outbound )?sender|envelope blocked`},
	{class: ports.BounceClassBadDomain, text: `null mx|no such domain|unknown domain|domain (name )?(not found|does not exist|unknown|is invalid)|` +
		`host (or domain name )?not found|host unknown|find the recipient domain|no mx (record|host)|domain has no mx`},
	{class: ports.BounceClassBadMailbox, text: `user unknown|unknown (user|recipient|mailbox|address)|recipient unknown|` +
		`no such (user|mailbox|recipient|address|account)|` +
		`(user|mailbox|recipient|address|account)\b[^.;]*(does not|doesn't|does no longer) exist|` +
		`(does not|doesn't) have an? [^ ]+ account|invalid (recipient|mailbox|address|user)|` +
		`(recipient|user|mailbox|address) not found|recipientnotfound|mailbox unavailable|no mailbox here|` +
		`unrouteable address|no longer on server|is not a valid (mailbox|user|recipient)|not our customer`},
	{class: ports.BounceClassInactiveMailbox, text: `(mailbox|account|address|user)\b[^.;]* (is|has been) (disabled|deactivated|suspended|inactive|closed|expired|frozen|locked)|` +
		`inactive (account|mailbox|user|address)|(mailbox|account) disabled|no longer (active|in use)`},
	{class: ports.BounceClassMailboxFull, text: `over ?quota|quota exceeded|exceeded (the |its |their )?(storage|quota)|mailbox (is )?full|` +
		`out of (storage|space)|insufficient space in mailbox|storage (allocation|quota)`},
	{class: ports.BounceClassMessageTooLarge, text: `(message|mail|email)( size)? (is )?too (large|big)|size (limit )?exceed|` +
		`exceeds? (the )?(fixed |maximum |max )?(message )?size|message size|maximum (message |email )?size`},
	{class: ports.BounceClassContent, text: `virus|malware|infected|trojan|phishing|prohibited attachment|` +
		`attachment[^.]*(not allowed|blocked|prohibited|rejected)|banned (attachment|file)|security (issue|risk)|` +
		`dangerous (content|attachment)`},
	{class: ports.BounceClassRateLimited, text: `rate.?limit|too many (connections|concurrent|messages|mails?|emails|recipients|sessions)|` +
		`too much mail|throttl|receiving mail (too quickly|at a rate)|(excessive|unexpected|unusual) (volume|rate)|` +
		`concurrent (server |smtp )?connections|connection (rate )?limit|limit exceeded|exceeded [^.]*limit|` +
		`try again later from|sending rate`},
	{class: ports.BounceClassSpamBlock, text: `spam|unsolicited|junk mail|bulk mail|block ?list|black ?list|blocklisted|blacklisted|` +
		`deny ?list|\blisted (at|on|in|by)\b|in a black list|dnsbl|\brbl\b|barracuda|spamcop|sorbs|uceprotect|` +
		`reputation|banned sending ip|permanently deferred|\[ts0[1-3]\]|\[bl[0-9]+\]|ipcheck\.proofpoint|` +
		`blocked - see|client host [^ ]* ?blocked`},
	{class: ports.BounceClassRouting, text: `connection (refused|reset|timed out)|i/o timeout|no route to host|network is unreachable|` +
		`dial tcp|routing loop|too many hops`},
	{class: ports.BounceClassProtocol, text: `syntax error|syntactically invalid|unrecognized command|command (not )?(recognized|unrecognized|implemented)|` +
		`bad sequence|out of sequence|line too long|need (mail|rcpt|helo|ehlo)|invalid (command|argument|helo|ehlo)|` +
		`helo command rejected|bare (lf|linefeed)|protocol error`},
	{class: ports.BounceClassPolicyBlock, text: `polic(y|ies)|not accepted|administrative prohibition|prohibited|not authori[sz]ed|` +
		`access denied|denied|refused|blocked|restricted|tls (is )?required|must use tls|secure connection|content filter|spoof`},
	{class: ports.BounceClassTransient, only: '4', text: `try (again )?later|temporar|grey.?list|gray.?list|deferred|busy|` +
		`unavailable|system problem|local problem|not available|resources`},
}

// subjectRules are tier 3: what an enhanced code's subject says when nothing more specific matched.
// Addressing (X.1) and mailbox (X.2) codes with an unknown detail are left to the reply code: 5.1.0 is
// Exchange's "sender denied" as often as an unknown recipient.
var subjectRules = []rule{
	{class: ports.BounceClassRouting, code: "x.4"},     // network and routing status
	{class: ports.BounceClassProtocol, code: "x.5"},    // mail delivery protocol status
	{class: ports.BounceClassContent, code: "x.6"},     // message content or media status
	{class: ports.BounceClassPolicyBlock, code: "x.7"}, // security or policy status
}

// codeRules are tier 4: the basic reply code (RFC 5321 §4.2.2, §4.2.3; RFC 7504 for 521 and 556).
var codeRules = []rule{
	{class: ports.BounceClassBadDomain, code: "521"},   // host does not accept mail
	{class: ports.BounceClassBadDomain, code: "556"},   // domain does not accept mail
	{class: ports.BounceClassMailboxFull, code: "552"}, // exceeded storage allocation
	{class: ports.BounceClassBadMailbox, code: "553"},  // mailbox name not allowed
	{class: ports.BounceClassRouting, code: "551"},     // user not local
	{class: ports.BounceClassProtocol, code: "500"},    // syntax error, command unrecognised
	{class: ports.BounceClassProtocol, code: "501"},    // syntax error in parameters or arguments
	{class: ports.BounceClassProtocol, code: "502"},    // command not implemented
	{class: ports.BounceClassProtocol, code: "503"},    // bad sequence of commands
	{class: ports.BounceClassProtocol, code: "504"},    // command parameter not implemented
	{class: ports.BounceClassProtocol, code: "555"},    // MAIL FROM or RCPT TO parameters not recognised
	{class: ports.BounceClassTransient, code: "4"},     // every other temporary failure
}

// compiledRule is a rule ready to match: its code split into class, subject and detail, its words compiled.
type compiledRule struct {
	class string
	// cls is the code's class ('4' or '5'), 0 for "x"; subject and detail its parts, detail "" for a subject
	// rule. code is the reply code of a code rule.
	cls             byte
	subject, detail string
	code            string
	only            byte
	// words are the alternatives of the rule's text; nil matches any words.
	words []alternative
}

// alternative is one top-level alternative of a text rule: a plain phrase looked for with strings.Contains,
// or an expression run only when a literal it must begin with is in the text. Go's regexp engine walks every state of
// a large alternation over every byte, which made one reply cost a third of a millisecond; split like this,
// most replies are decided by substring searches.
type alternative struct {
	phrase string
	// starts are the literals a match must begin with, one of which the text must contain before the
	// expression is run; nil when the expression can begin with anything.
	starts []string
	re     *regexp.Regexp
}

func (a alternative) matches(text string) bool {
	if a.re == nil {
		return strings.Contains(text, a.phrase)
	}
	if a.starts != nil && !containsAny(text, a.starts) {
		return false
	}
	return a.re.MatchString(text)
}

func containsAny(text string, literals []string) bool {
	for _, l := range literals {
		if strings.Contains(text, l) {
			return true
		}
	}
	return false
}

// startLiterals returns literals one of which every match of re begins with, or nil when it cannot tell
// (the expression may begin with a character class or an empty match).
func startLiterals(re *syntax.Regexp) []string {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return nil
		}
		return []string{string(re.Rune)}
	case syntax.OpCapture:
		return startLiterals(re.Sub[0])
	case syntax.OpAlternate:
		var out []string
		for _, sub := range re.Sub {
			l := startLiterals(sub)
			if l == nil {
				return nil
			}
			out = append(out, l...)
		}
		return out
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			switch sub.Op {
			case syntax.OpWordBoundary, syntax.OpNoWordBoundary, syntax.OpBeginLine, syntax.OpBeginText:
				continue
			}
			return startLiterals(sub)
		}
	}
	return nil
}

// compileText splits an expression into its top-level alternatives (outside parentheses and brackets) and
// compiles each.
func compileText(expr string) []alternative {
	var alts []alternative
	depth, inClass, start := 0, false, 0
	add := func(part string) {
		re := regexp.MustCompile(part)
		if prefix, complete := re.LiteralPrefix(); complete {
			alts = append(alts, alternative{phrase: prefix})
			return
		}
		parsed, err := syntax.Parse(part, syntax.Perl)
		if err != nil {
			panic(fmt.Sprintf("bounceclass: %q: %v", part, err))
		}
		alts = append(alts, alternative{starts: startLiterals(parsed.Simplify()), re: re})
	}
	for i := 0; i < len(expr); i++ {
		switch c := expr[i]; {
		case c == '\\':
			i++
		case inClass:
			inClass = c != ']'
		case c == '[':
			inClass = true
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == '|' && depth == 0:
			add(expr[start:i])
			start = i + 1
		}
	}
	add(expr[start:])
	return alts
}

// compiled holds the four tables, compiled once when the package loads; a bad expression or code in them is
// a programming error and panics at start-up (and in every test).
var compiled = struct {
	status, text, subject, code []compiledRule
}{
	status:  compileRules(statusRules, true),
	text:    compileRules(textRules, false),
	subject: compileRules(subjectRules, true),
	code:    compileCodeRules(codeRules),
}

func compileRules(rules []rule, withCode bool) []compiledRule {
	out := make([]compiledRule, len(rules))
	for i, r := range rules {
		c := compiledRule{class: r.class, only: r.only}
		if withCode {
			parts := strings.Split(r.code, ".")
			if len(parts) < 2 || len(parts) > 3 || (parts[0] != "x" && parts[0] != "4" && parts[0] != "5") {
				panic(fmt.Sprintf("bounceclass: rule %d: bad code %q", i, r.code))
			}
			if parts[0] != "x" {
				c.cls = parts[0][0]
			}
			c.subject = parts[1]
			if len(parts) == 3 {
				c.detail = parts[2]
			}
		}
		if r.text != "" {
			c.words = compileText(r.text)
		}
		out[i] = c
	}
	return out
}

func compileCodeRules(rules []rule) []compiledRule {
	out := make([]compiledRule, len(rules))
	for i, r := range rules {
		if (len(r.code) != 3 && len(r.code) != 1) || (r.code[0] != '4' && r.code[0] != '5') {
			panic(fmt.Sprintf("bounceclass: code rule %d: bad code %q", i, r.code))
		}
		out[i] = compiledRule{class: r.class, code: r.code}
	}
	return out
}

// matchesStatus reports whether the valid enhanced code s is the rule's: same class unless the rule says
// x, same subject, and same detail unless the rule is about a subject only.
func (c compiledRule) matchesStatus(s string) bool {
	if c.cls != 0 && c.cls != s[0] {
		return false
	}
	subject, detail, _ := strings.Cut(s[2:], ".")
	return subject == c.subject && (c.detail == "" || detail == c.detail)
}

// matchesText reports whether one of the rule's alternatives is in text; a rule without words matches any
// text.
func (c compiledRule) matchesText(text string) bool {
	if c.words == nil {
		return true
	}
	for _, a := range c.words {
		if a.matches(text) {
			return true
		}
	}
	return false
}
