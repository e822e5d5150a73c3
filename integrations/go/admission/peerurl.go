package admission

import (
	"regexp"
	"strconv"
	"strings"
)

// Peer URLs are compared in the one canonical form the broker signs (the TypeScript parser,
// src/shared/protocol/peer-url.ts, rule for rule): scheme://host:port with the scheme and host
// in lower case, an IPv6 address compressed as RFC 5952 writes it, a port always named (no
// default port is assumed) and without leading zeros, and no path but an optional trailing
// slash. A value that is not such a URL is compared as written, less one trailing slash, so
// it never equals a signed peer_url. Go's net/url and netip are more lenient (they would read
// 0177.0.0.1 or an IPv4-mapped IPv6 address as IPv4), so they are not used here.

var (
	peerShape   = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*)://(\[[^\]]*\]|[^/:\[\]]*)(?::([^/]*))?(/?)$`)
	dnsLabel    = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	octet       = regexp.MustCompile(`^(0|[1-9][0-9]{0,2})$`)
	portPattern = regexp.MustCompile(`^[1-9][0-9]{0,4}$`)
	digits      = regexp.MustCompile(`^[0-9]+$`)
	hexNumber   = regexp.MustCompile(`^0x[0-9a-f]*$`)
	ipv6Chars   = regexp.MustCompile(`^[0-9a-fA-F:.]+$`)
	ipv6Group   = regexp.MustCompile(`^[0-9a-fA-F]{1,4}$`)
)

// CanonicalPeerURL is how peer URLs are compared: the canonical form above, or for a value that
// is not a valid peer URL, the value less one trailing slash.
func CanonicalPeerURL(u string) string {
	if c, ok := canonicalPeer(u); ok {
		return c
	}
	return strings.TrimSuffix(u, "/")
}

func canonicalPeer(value string) (string, bool) {
	if len(value) > 512 {
		return "", false
	}
	for _, r := range value {
		// ASCII without whitespace or control characters (these include all of \x00-\x20 and \x7f).
		if r < 0x21 || r > 0x7e {
			return "", false
		}
	}
	if strings.ContainsAny(value, "?#") {
		return "", false
	}
	start := strings.Index(value, "://")
	if start < 0 || strings.Contains(strings.SplitN(value[start+3:], "/", 2)[0], "@") {
		return "", false
	}
	m := peerShape.FindStringSubmatch(value)
	if m == nil {
		return "", false
	}
	scheme, rawHost, rawPort := strings.ToLower(m[1]), m[2], m[3]
	if scheme != "http" && scheme != "https" {
		return "", false
	}
	// An absent port and an empty one differ in the pattern's groups, yet both are refused.
	if !portPattern.MatchString(rawPort) {
		return "", false
	}
	port, err := strconv.Atoi(rawPort)
	if err != nil || port > 65535 {
		return "", false
	}
	host, ok := canonicalHost(rawHost)
	if !ok {
		return "", false
	}
	return scheme + "://" + host + ":" + strconv.Itoa(port), true
}

func canonicalHost(raw string) (string, bool) {
	if raw == "" {
		return "", false
	}
	if strings.HasPrefix(raw, "[") {
		v6, ok := canonicalIPv6(raw[1 : len(raw)-1])
		return "[" + v6 + "]", ok
	}
	host := strings.ToLower(raw)
	labels := strings.Split(host, ".")
	last := labels[len(labels)-1]
	// A name whose last label is a number is an IPv4 address to every URL parser: only the
	// four-decimal-octet spelling is accepted.
	if digits.MatchString(last) || hexNumber.MatchString(last) {
		return host, isDottedQuad(host)
	}
	if len(host) > 253 {
		return "", false
	}
	for _, l := range labels {
		if !dnsLabel.MatchString(l) {
			return "", false
		}
	}
	return host, true
}

func isDottedQuad(host string) bool {
	parts := strings.Split(host, ".")
	if len(parts) != 4 {
		return false
	}
	for _, p := range parts {
		if !octet.MatchString(p) {
			return false
		}
		if n, _ := strconv.Atoi(p); n > 255 {
			return false
		}
	}
	return true
}

// ipv6Groups: the 8 groups of an IPv6 address, with an optional dotted-quad tail.
func ipv6Groups(text string) ([]int, bool) {
	if !ipv6Chars.MatchString(text) {
		return nil, false
	}
	var tail []int
	head := text
	lastColon := strings.LastIndex(text, ":")
	if strings.Contains(text[lastColon+1:], ".") {
		quad := text[lastColon+1:]
		if !isDottedQuad(quad) {
			return nil, false
		}
		o := make([]int, 4)
		for i, p := range strings.Split(quad, ".") {
			o[i], _ = strconv.Atoi(p)
		}
		tail = []int{o[0]<<8 | o[1], o[2]<<8 | o[3]}
		head = text[:lastColon+1]
		if strings.HasSuffix(head, ":") && !strings.HasSuffix(head, "::") {
			head = head[:len(head)-1]
		}
	}
	halves := strings.Split(head, "::")
	if len(halves) > 2 {
		return nil, false
	}
	groups := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, ":")
	}
	left := groups(halves[0])
	var right []string
	if len(halves) == 2 {
		right = groups(halves[1])
	}
	for _, g := range append(append([]string{}, left...), right...) {
		if !ipv6Group.MatchString(g) {
			return nil, false
		}
	}
	given := len(left) + len(right) + len(tail)
	if (len(halves) == 1 && given != 8) || (len(halves) == 2 && given > 7) {
		return nil, false
	}
	out := make([]int, 0, 8)
	for _, g := range left {
		n, _ := strconv.ParseInt(g, 16, 32)
		out = append(out, int(n))
	}
	for i := 0; i < 8-given; i++ {
		out = append(out, 0)
	}
	for _, g := range right {
		n, _ := strconv.ParseInt(g, 16, 32)
		out = append(out, int(n))
	}
	return append(out, tail...), true
}

// canonicalIPv6 writes an address as RFC 5952 does: lower case, no leading zeros, the longest
// run of two or more zero groups as "::".
func canonicalIPv6(text string) (string, bool) {
	g, ok := ipv6Groups(text)
	if !ok {
		return "", false
	}
	bestStart, bestLength := -1, 1
	for i := 0; i < 8; {
		if g[i] != 0 {
			i++
			continue
		}
		j := i
		for j < 8 && g[j] == 0 {
			j++
		}
		if j-i > bestLength {
			bestStart, bestLength = i, j-i
		}
		i = j
	}
	hex := make([]string, 8)
	for i, n := range g {
		hex[i] = strconv.FormatInt(int64(n), 16)
	}
	if bestStart < 0 {
		return strings.Join(hex, ":"), true
	}
	return strings.Join(hex[:bestStart], ":") + "::" + strings.Join(hex[bestStart+bestLength:], ":"), true
}
