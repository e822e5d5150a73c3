package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// TrustOptions configure a Trust. Broker and Cluster are required.
type TrustOptions struct {
	// Broker is the broker's URL (a path prefix is kept for requests).
	Broker  string
	Cluster string
	// JWKS pins the cluster's public keys instead of fetching them from the broker.
	JWKS *jose.JSONWebKeySet
	// JWKSCacheMaxAge is how long fetched keys are used before a refetch; default 10 min.
	JWKSCacheMaxAge time.Duration
	// JWKSCooldown is the least time after a fetch before an unknown kid causes another one;
	// default 5 s, negative for none.
	JWKSCooldown time.Duration
	// Timeout bounds each broker request; default 5 s.
	Timeout time.Duration
	// HTTPClient makes the broker requests; default http.DefaultClient.
	HTTPClient *http.Client
}

// RevocationList is what the broker's GET /v1/clusters/{cluster}/revocations returned.
type RevocationList struct {
	// Revoked maps the jti of every admission that is no longer active (and not yet expired) to
	// its entry.
	Revoked map[string]RevokedAdmission
	// FetchedAt is when the broker gave us this list, by the verifier's clock.
	FetchedAt time.Time
	ETag      string
}

// RevokedAdmission is one entry of the revocation list.
type RevokedAdmission struct {
	JTI string `json:"jti"`
	Exp int64  `json:"exp"`
	// Reason is the admission's status: revoked, completed, abandoned or superseded.
	Reason string `json:"reason,omitempty"`
}

// IntrospectAnswer is the broker's answer to POST …/admissions/introspect.
type IntrospectAnswer struct {
	Active bool           `json:"active"`
	Claims map[string]any `json:"claims,omitempty"`
	Reason string         `json:"reason,omitempty"`
	// LeaseRemaining is how long an active admission's lease has left as the broker counts it
	// (its leaseExpiresAt less the Date of its answer, so a skewed local clock does not matter);
	// nil when the broker did not say. A join API bounds an etcd change by it: past the lease's
	// end the broker may have admitted the next node.
	LeaseRemaining *time.Duration `json:"-"`
}

// ErrBrokerUnreachable wraps every failure to get a usable answer from the broker.
var ErrBrokerUnreachable = errors.New("broker unreachable")

// Trust is what a verifier knows about one cluster of one broker: its public keys (fetched,
// cached, refetched on an unknown kid), the introspection call, and the last revocation list.
// It is safe for concurrent use; keep one per (broker, cluster) for the life of the process.
type Trust struct {
	base    string
	cluster string
	client  *http.Client
	timeout time.Duration
	maxAge  time.Duration
	cool    time.Duration
	pinned  bool

	mu          sync.Mutex
	keys        *jose.JSONWebKeySet
	keysAt      time.Time
	lastStatus  int
	revocations *RevocationList
}

// NewTrust makes a Trust.
func NewTrust(o TrustOptions) (*Trust, error) {
	if _, err := url.Parse(o.Broker); err != nil || o.Broker == "" {
		return nil, fmt.Errorf("admission: broker URL %q: %w", o.Broker, err)
	}
	if o.Cluster == "" {
		return nil, errors.New("admission: no cluster")
	}
	t := &Trust{
		base:    strings.TrimRight(o.Broker, "/"),
		cluster: o.Cluster,
		client:  o.HTTPClient,
		timeout: o.Timeout,
		maxAge:  o.JWKSCacheMaxAge,
		cool:    o.JWKSCooldown,
	}
	if t.client == nil {
		t.client = http.DefaultClient
	}
	if t.timeout == 0 {
		t.timeout = 5 * time.Second
	}
	if t.maxAge == 0 {
		t.maxAge = 10 * time.Minute
	}
	if t.cool == 0 {
		t.cool = 5 * time.Second
	} else if t.cool < 0 {
		t.cool = 0
	}
	if o.JWKS != nil {
		t.pinned = true
		t.keys = o.JWKS
	}
	return t, nil
}

func (t *Trust) url(path string) string {
	return t.base + "/v1/clusters/" + url.PathEscape(t.cluster) + path
}

// errNoKey: no key has this kid, even after a refetch.
var errNoKey = errors.New("no matching key")

// key returns the candidate keys for a token's kid (all Ed25519 keys when the token names none),
// fetching the JWKS when none is cached or it is stale, and refetching once on an unknown kid
// (at most once per cooldown).
func (t *Trust) key(ctx context.Context, kid string) ([]jose.JSONWebKey, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	if !t.pinned && (t.keys == nil || now.Sub(t.keysAt) > t.maxAge) {
		if err := t.fetchKeys(ctx, now); err != nil {
			return nil, err
		}
	}
	found := match(t.keys, kid)
	if len(found) == 0 && !t.pinned && now.Sub(t.keysAt) >= t.cool {
		if err := t.fetchKeys(ctx, now); err != nil {
			return nil, err
		}
		found = match(t.keys, kid)
	}
	if len(found) == 0 {
		return nil, errNoKey
	}
	return found, nil
}

func match(set *jose.JSONWebKeySet, kid string) []jose.JSONWebKey {
	if set == nil {
		return nil
	}
	var out []jose.JSONWebKey
	for _, k := range set.Keys {
		if (kid == "" || k.KeyID == kid) && (k.Algorithm == "" || k.Algorithm == string(jose.EdDSA)) && k.Use != "enc" && k.IsPublic() {
			out = append(out, k)
		}
	}
	return out
}

// jwksError: the JWKS could not be fetched; status is the broker's HTTP status, if it answered.
type jwksError struct {
	status int
	err    error
}

func (e *jwksError) Error() string { return "fetching the cluster's JWKS: " + e.err.Error() }
func (e *jwksError) Unwrap() error { return e.err }

func (t *Trust) fetchKeys(ctx context.Context, now time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.url("/jwks.json"), nil)
	if err != nil {
		return &jwksError{err: err}
	}
	req.Header.Set("Accept", "application/json")
	res, err := t.client.Do(req)
	if err != nil {
		return &jwksError{err: err}
	}
	defer res.Body.Close()
	t.lastStatus = res.StatusCode
	if res.StatusCode != http.StatusOK {
		return &jwksError{status: res.StatusCode, err: fmt.Errorf("HTTP %d", res.StatusCode)}
	}
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&set); err != nil {
		return &jwksError{status: res.StatusCode, err: err}
	}
	t.keys, t.keysAt = &set, now
	return nil
}

// Introspect asks the broker whether the token is active now. Any failure to get a usable answer
// is an error wrapping ErrBrokerUnreachable.
func (t *Trust) Introspect(ctx context.Context, token string) (*IntrospectAnswer, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	body, _ := json.Marshal(map[string]string{"token": token})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url("/admissions/introspect"), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: introspection: %v", ErrBrokerUnreachable, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	res, err := t.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: introspection failed: %v", ErrBrokerUnreachable, err)
	}
	defer res.Body.Close()
	var raw struct {
		Active *bool          `json:"active"`
		Claims map[string]any `json:"claims"`
		Reason *string        `json:"reason"`
		Lease  *string        `json:"leaseExpiresAt"`
	}
	if res.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&raw) != nil || raw.Active == nil {
		return nil, fmt.Errorf("%w: introspection answered HTTP %d", ErrBrokerUnreachable, res.StatusCode)
	}
	answer := &IntrospectAnswer{Active: *raw.Active, Claims: raw.Claims, Reason: "unknown"}
	if answer.Active {
		answer.Reason = ""
		answer.LeaseRemaining = leaseRemaining(raw.Lease, res.Header.Get("Date"))
	} else if raw.Reason != nil {
		answer.Reason = *raw.Reason
	}
	return answer, nil
}

// RefreshRevocations fetches the revocation list (conditionally, with the last ETag), keeps it
// and returns it. now is the verifier's clock, recorded as the list's FetchedAt.
func (t *Trust) RefreshRevocations(ctx context.Context, now time.Time) (*RevocationList, error) {
	t.mu.Lock()
	held := t.revocations
	t.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.url("/revocations"), nil)
	if err != nil {
		return nil, fmt.Errorf("%w: revocation list: %v", ErrBrokerUnreachable, err)
	}
	req.Header.Set("Accept", "application/json")
	if held != nil && held.ETag != "" {
		req.Header.Set("If-None-Match", held.ETag)
	}
	res, err := t.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: revocation list fetch failed: %v", ErrBrokerUnreachable, err)
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusNotModified && held != nil {
		fresh := *held
		fresh.FetchedAt = now
		t.setRevocations(&fresh)
		return &fresh, nil
	}
	var body struct {
		Revoked []RevokedAdmission `json:"revoked"`
	}
	if res.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(res.Body, 8<<20)).Decode(&body) != nil || body.Revoked == nil {
		return nil, fmt.Errorf("%w: revocation list answered HTTP %d", ErrBrokerUnreachable, res.StatusCode)
	}
	list := &RevocationList{Revoked: make(map[string]RevokedAdmission, len(body.Revoked)), FetchedAt: now, ETag: res.Header.Get("ETag")}
	for _, e := range body.Revoked {
		if e.JTI != "" {
			list.Revoked[e.JTI] = e
		}
	}
	t.setRevocations(list)
	return list, nil
}

func (t *Trust) setRevocations(list *RevocationList) {
	t.mu.Lock()
	t.revocations = list
	t.mu.Unlock()
}

// Revocations is the last revocation list fetched, or nil.
func (t *Trust) Revocations() *RevocationList {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.revocations
}

var (
	sharedMu sync.Mutex
	shared   = map[string]*Trust{}
)

// SharedTrust is one Trust per (broker, cluster, HTTP client) for the life of the process.
func SharedTrust(broker, cluster string, client *http.Client) (*Trust, error) {
	key := fmt.Sprintf("%s|%s|%p", strings.TrimRight(broker, "/"), cluster, client)
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if t, ok := shared[key]; ok {
		return t, nil
	}
	t, err := NewTrust(TrustOptions{Broker: broker, Cluster: cluster, HTTPClient: client})
	if err != nil {
		return nil, err
	}
	shared[key] = t
	return t, nil
}

// leaseRemaining is the lease's end less the broker's Date (this machine's clock when it sent none).
func leaseRemaining(expiresAt *string, date string) *time.Duration {
	if expiresAt == nil {
		return nil
	}
	end, err := time.Parse(time.RFC3339Nano, *expiresAt)
	if err != nil {
		return nil
	}
	answered, err := http.ParseTime(date)
	if err != nil {
		answered = time.Now()
	} else {
		// The Date header counts whole seconds: the broker's clock may be up to 999 ms past it,
		// so count from the latest it can be and never promise more lease than is left.
		answered = answered.Add(time.Second - time.Millisecond)
	}
	left := end.Sub(answered)
	return &left
}
