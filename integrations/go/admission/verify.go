package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

const (
	// Algorithm is the only JWS algorithm an admission token may use.
	Algorithm = jose.EdDSA
	// Type is the typ header an admission token must carry.
	Type = "admission+jwt"
	// DefaultClockSkew is the skew allowed on exp and nbf unless Options.ClockSkew says otherwise.
	DefaultClockSkew = 30 * time.Second
	// NoClockSkew, as Options.ClockSkew, allows none.
	NoClockSkew time.Duration = -1
	// maxTokenLength: anything longer is not one of ours.
	maxTokenLength = 8192
)

// Role is which admission role a call accepts.
type Role string

const (
	RoleJoin      Role = "join"
	RoleBootstrap Role = "bootstrap"
	RoleAny       Role = "any"
)

// ActiveCheck is how Verify establishes that the admission is still active.
type ActiveCheck string

const (
	// Introspect (the default) asks the broker every time; if it cannot be reached the token is
	// refused with BrokerUnavailable, unless RevocationListFallback allows the offline check.
	Introspect ActiveCheck = "introspect"
	// NoActiveCheck checks signature, claims and binding only. For tests and offline tooling.
	NoActiveCheck ActiveCheck = "none"
)

// ActiveBy says how the admission was found active.
type ActiveBy string

const (
	ByIntrospection  ActiveBy = "introspection"
	ByRevocationList ActiveBy = "revocation-list"
	Unchecked        ActiveBy = "unchecked"
)

// Options say what a token must be good for. Broker, Cluster and Node are required.
type Options struct {
	// Broker is the broker's URL. Keys, introspection and the revocation list are fetched there.
	Broker  string
	Cluster string
	// Node is the node the request is for: it must equal the token's sub.
	Node string
	// PeerURL is the peer URL the request would add: it must equal peer_url, both in their
	// canonical form (CanonicalPeerURL: case, IPv6 spelling and a trailing slash do not count). Leave it empty only where the request names no peer (promote).
	PeerURL string
	// Role is which role may pass; default RoleJoin (a bootstrap node never asks to be added).
	Role Role
	// Issuer is the iss the token must carry; default the origin of Broker.
	Issuer string
	// HTTPClient makes the broker requests (used for the shared Trust); default http.DefaultClient.
	HTTPClient *http.Client
	// ClockSkew is allowed on exp and nbf; default DefaultClockSkew (30 s), NoClockSkew for none.
	ClockSkew time.Duration
	// ActiveCheck: Introspect (default) or NoActiveCheck.
	ActiveCheck ActiveCheck
	// RevocationListFallback, when not zero, is an explicit opt-in: if the broker cannot be
	// reached for introspection, accept a token whose jti is not on a revocation list fetched at
	// most this long ago (a fresh one is fetched first if possible). A token revoked after that
	// fetch is then accepted, so keep it short.
	RevocationListFallback time.Duration
	// Trust holds the cluster's keys and makes the broker calls; default one shared per
	// (Broker, Cluster, HTTPClient). Make your own with NewTrust to pin keys or tune the cache.
	Trust *Trust
	// Now is the verifier's clock; default time.Now.
	Now func() time.Time
}

// Claims are a verified admission token's claims (docs/protocol.md, "Admission token").
type Claims struct {
	Issuer    string    `json:"iss"`
	Audience  string    `json:"aud"`
	Subject   string    `json:"sub"` // the node
	ID        string    `json:"jti"` // the admission
	IssuedAt  time.Time `json:"-"`
	NotBefore time.Time `json:"-"`
	Expiry    time.Time `json:"-"`
	Cluster   string    `json:"cluster"`
	Ticket    string    `json:"ticket"`
	PeerURL   string    `json:"peer_url"`
	Role      Role      `json:"role"`
	// ActiveBy says how activeness was established.
	ActiveBy ActiveBy `json:"-"`
}

// Verify checks that token is an admission good for adding opts.Node's etcd member now, in this
// order: the signature with the cluster's key (alg EdDSA only, kid looked up in the cluster's
// JWKS, refetched once on an unknown kid), typ, iss, aud, the required claims, exp and nbf with
// the clock skew; the binding to the request (sub, peer_url, role); then whether the admission
// is still active (introspection, or the revocation list when allowed). Every refusal is an
// *Error with a Code.
func Verify(ctx context.Context, token string, opts Options) (*Claims, error) {
	trust, err := opts.trust()
	if err != nil {
		return nil, err
	}
	claims, err := verifyClaims(ctx, token, opts, trust)
	if err != nil {
		return nil, err
	}
	if err := checkBinding(claims, opts); err != nil {
		return nil, err
	}
	by, err := checkActive(ctx, token, claims, opts, trust)
	if err != nil {
		return nil, err
	}
	claims.ActiveBy = by
	return claims, nil
}

func (o Options) trust() (*Trust, error) {
	if o.Trust != nil {
		return o.Trust, nil
	}
	return SharedTrust(o.Broker, o.Cluster, o.HTTPClient)
}

func (o Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

func (o Options) issuer() (string, error) {
	if o.Issuer != "" {
		return o.Issuer, nil
	}
	u, err := url.Parse(o.Broker)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "", fmt.Errorf("admission: broker URL %q is not absolute", o.Broker)
	}
	return u.Scheme + "://" + u.Host, nil
}

var requiredClaims = []string{"iss", "aud", "sub", "jti", "iat", "nbf", "exp", "cluster", "ticket", "peer_url", "role"}

func verifyClaims(ctx context.Context, token string, opts Options, trust *Trust) (*Claims, error) {
	if token == "" || len(token) > maxTokenLength {
		return nil, refuse(InvalidToken, "malformed", nil, "no admission token, or an oversized one")
	}
	issuer, err := opts.issuer()
	if err != nil {
		return nil, err
	}
	if strings.Count(token, ".") != 2 {
		return nil, refuse(InvalidToken, "malformed", nil, "not a compact JWS")
	}
	jws, err := jose.ParseSignedCompact(token, []jose.SignatureAlgorithm{Algorithm})
	if err != nil {
		return nil, refuse(InvalidToken, "jws", err, "not a valid admission token: %v", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, refuse(InvalidToken, "jws", nil, "not a valid admission token: %d signatures", len(jws.Signatures))
	}
	header := jws.Signatures[0].Protected
	keys, err := trust.key(ctx, header.KeyID)
	if err != nil {
		var fetch *jwksError
		switch {
		case errors.Is(err, errNoKey):
			return nil, refuse(UnknownKey, "kid", nil, "no key of this cluster matches the token's kid")
		case errors.As(err, &fetch) && fetch.status == http.StatusNotFound:
			return nil, refuse(InvalidToken, "unknown_cluster", err, "the broker does not know cluster %s", opts.Cluster)
		default:
			// No JWKS (network error, 5xx, unreadable body): we cannot tell, so "not now" rather than "no".
			return nil, refuse(BrokerUnavailable, "jwks", err, "cannot fetch the cluster's keys: %v", err)
		}
	}
	var payload []byte
	for _, k := range keys {
		if payload, err = jws.Verify(k); err == nil {
			break
		}
	}
	if err != nil {
		return nil, refuse(InvalidToken, "signature", err, "not a valid admission token: signature verification failed")
	}
	if typ, _ := header.ExtraHeaders[jose.HeaderType].(string); normalizeTyp(typ) != Type {
		return nil, refuse(InvalidToken, "typ", nil, "the admission token's typ is %q, not %q", typ, Type)
	}
	var raw map[string]any
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil || raw == nil {
		return nil, refuse(InvalidToken, "payload", err, "the admission token's claims are not a JSON object")
	}
	for _, name := range requiredClaims {
		if _, ok := raw[name]; !ok {
			return nil, refuse(InvalidToken, name, nil, "the admission token has no %s claim", name)
		}
	}
	if iss, _ := raw["iss"].(string); iss != issuer {
		return nil, refuse(InvalidToken, "iss", nil, "the admission token's iss is %v, not %s", raw["iss"], issuer)
	}
	audience := "etcd-join:" + opts.Cluster
	if !hasAudience(raw["aud"], audience) {
		return nil, refuse(InvalidToken, "aud", nil, "the admission token's aud is %v, not %s", raw["aud"], audience)
	}
	skew := opts.ClockSkew
	if skew == 0 {
		skew = DefaultClockSkew
	} else if skew < 0 {
		skew = 0
	}
	now := float64(opts.now().Unix())
	tolerance := skew.Seconds()
	// In jose's order (the TypeScript verifier's): iat must be a number; nbf, then exp, each
	// checked as soon as it is read.
	times := map[string]float64{}
	for _, name := range []string{"iat", "nbf", "exp"} {
		n, ok := raw[name].(json.Number)
		f, err := n.Float64()
		if !ok || err != nil || math.IsInf(f, 0) {
			return nil, refuse(InvalidToken, name, nil, "the admission token's %s claim is not a number", name)
		}
		times[name] = f
		if name == "nbf" && f > now+tolerance {
			return nil, refuse(TokenNotYetValid, "nbf", nil, "the admission token is not valid yet (nbf)")
		}
		if name == "exp" && f <= now-tolerance {
			return nil, refuse(TokenExpired, "exp", nil, "the admission token has expired")
		}
	}
	for _, name := range []string{"sub", "jti", "cluster", "ticket", "peer_url", "role"} {
		if _, ok := raw[name].(string); !ok {
			return nil, refuse(InvalidToken, "claims", nil, "claim %s is missing or not a string", name)
		}
	}
	if raw["cluster"] != opts.Cluster {
		return nil, refuse(InvalidToken, "claims", nil, "token is for cluster %v", raw["cluster"])
	}
	role := Role(raw["role"].(string))
	if role != RoleJoin && role != RoleBootstrap {
		return nil, refuse(InvalidToken, "claims", nil, "claim role is neither join nor bootstrap")
	}
	return &Claims{
		Issuer:    issuer,
		Audience:  audience,
		Subject:   raw["sub"].(string),
		ID:        raw["jti"].(string),
		IssuedAt:  unix(times["iat"]),
		NotBefore: unix(times["nbf"]),
		Expiry:    unix(times["exp"]),
		Cluster:   opts.Cluster,
		Ticket:    raw["ticket"].(string),
		PeerURL:   raw["peer_url"].(string),
		Role:      role,
	}, nil
}

func unix(seconds float64) time.Time {
	whole, frac := math.Modf(seconds)
	return time.Unix(int64(whole), int64(frac*1e9))
}

// normalizeTyp: like jose (and RFC 7515), "application/" may be left off and case does not count.
func normalizeTyp(typ string) string {
	typ = strings.ToLower(typ)
	return strings.TrimPrefix(typ, "application/")
}

func hasAudience(aud any, want string) bool {
	switch v := aud.(type) {
	case string:
		return v == want
	case []any:
		for _, a := range v {
			if a == want {
				return true
			}
		}
	}
	return false
}

func checkBinding(c *Claims, opts Options) error {
	if c.Subject != opts.Node {
		return refuse(WrongNode, "sub", nil, "the admission token is for node %s, not %s", c.Subject, opts.Node)
	}
	if opts.PeerURL != "" && CanonicalPeerURL(c.PeerURL) != CanonicalPeerURL(opts.PeerURL) {
		return refuse(WrongPeerURL, "peer_url", nil, "the admission token is for peer URL %s, not %s", c.PeerURL, opts.PeerURL)
	}
	role := opts.Role
	if role == "" {
		role = RoleJoin
	}
	if role != RoleAny && c.Role != role {
		return refuse(WrongRole, "role", nil, "the admission token's role is %s; this call needs %s", c.Role, role)
	}
	return nil
}

func checkActive(ctx context.Context, token string, c *Claims, opts Options, trust *Trust) (ActiveBy, error) {
	if opts.ActiveCheck == NoActiveCheck {
		return Unchecked, nil
	}
	answer, unreachable := trust.Introspect(ctx, token)
	if unreachable == nil {
		if answer.Active {
			return ByIntrospection, nil
		}
		return "", inactive(answer.Reason, c.ID)
	}
	if opts.RevocationListFallback <= 0 {
		return "", refuse(BrokerUnavailable, "introspection", unreachable, "cannot ask the broker whether the admission is active: %v", unreachable)
	}
	now := opts.now()
	list := trust.Revocations()
	if fresh, err := trust.RefreshRevocations(ctx, now); err == nil {
		list = fresh
	} // else expected while the broker is away; the list we hold may still be recent enough.
	if list == nil || now.Sub(list.FetchedAt) > opts.RevocationListFallback {
		age := "never fetched"
		if list != nil {
			age = fmt.Sprintf("%d s old", int(now.Sub(list.FetchedAt).Round(time.Second).Seconds()))
		}
		return "", refuse(BrokerUnavailable, "revocation_list_stale", unreachable, "the broker cannot be reached and the revocation list is %s (limit %d s)", age, int(opts.RevocationListFallback.Seconds()))
	}
	if entry, ok := list.Revoked[c.ID]; ok {
		reason := entry.Reason
		if reason == "" {
			reason = "revoked"
		}
		return "", inactive(reason, c.ID)
	}
	return ByRevocationList, nil
}
