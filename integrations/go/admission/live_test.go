package admission_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/etcd-join-broker/etcd-join-broker/integrations/go/admission"
)

// TestLiveBroker runs against a real broker: test/e2e/go-verifier.test.ts starts one (wrangler
// dev) and runs `go test -run TestLiveBroker` with JOIN_BROKER_URL and JOIN_BROKER_ADMIN_TOKEN
// set. Without them it is skipped.
func TestLiveBroker(t *testing.T) {
	brokerURL, adminToken := os.Getenv("JOIN_BROKER_URL"), os.Getenv("JOIN_BROKER_ADMIN_TOKEN")
	if brokerURL == "" || adminToken == "" {
		t.Skip("JOIN_BROKER_URL and JOIN_BROKER_ADMIN_TOKEN are not set (test/e2e/go-verifier.test.ts sets them)")
	}
	ctx := context.Background()
	b := &liveBroker{t: t, url: strings.TrimRight(brokerURL, "/"), token: adminToken}
	cluster := fmt.Sprintf("go-live-%d", time.Now().UnixNano()%1e9)
	enrollment := b.enroll(cluster)
	boot := b.ticket(cluster, enrollment, "ctrl-0", "https://10.0.0.10:2380")
	b.complete(cluster, boot, "1000")
	b.admin("PUT", "/v1/admin/clusters/"+cluster+"/policy", map[string]any{"maxInFlight": 8})

	fetches := &countingTransport{}
	trust, err := admission.NewTrust(admission.TrustOptions{Broker: b.url, Cluster: cluster, JWKSCooldown: -1, HTTPClient: &http.Client{Transport: fetches}})
	if err != nil {
		t.Fatal(err)
	}
	opts := func(a admitted) admission.Options {
		return admission.Options{Broker: b.url, Cluster: cluster, Node: a.node, PeerURL: a.peer, Trust: trust}
	}
	code := func(err error) string {
		var refusal *admission.Error
		if errors.As(err, &refusal) {
			return fmt.Sprintf("%d %s", refusal.Status(), refusal.Code)
		}
		return fmt.Sprintf("not a refusal: %v", err)
	}

	joiner := b.ticket(cluster, enrollment, "ctrl-1", "https://10.0.0.11:2380")
	t.Run("a broker-issued join token, after asking the broker", func(t *testing.T) {
		claims, err := admission.Verify(ctx, joiner.token, opts(joiner))
		if err != nil {
			t.Fatal(err)
		}
		if claims.ActiveBy != admission.ByIntrospection || claims.Subject != "ctrl-1" || claims.Role != admission.RoleJoin || claims.Cluster != cluster {
			t.Fatalf("claims %+v", claims)
		}
		// The same through the shared key cache, with only the documented options.
		if _, err := admission.Verify(ctx, joiner.token, admission.Options{Broker: b.url, Cluster: cluster, Node: "ctrl-1", PeerURL: "https://10.0.0.11:2380/"}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("another node, another peer URL", func(t *testing.T) {
		o := opts(joiner)
		o.Node = "ctrl-9"
		if _, err := admission.Verify(ctx, joiner.token, o); code(err) != "403 wrong_node" {
			t.Fatal(code(err))
		}
		o = opts(joiner)
		o.PeerURL = "https://10.0.0.99:2380"
		if _, err := admission.Verify(ctx, joiner.token, o); !errors.Is(err, admission.ErrWrongPeerURL) {
			t.Fatal(code(err))
		}
	})

	t.Run("a bootstrap token at a join call", func(t *testing.T) {
		if _, err := admission.Verify(ctx, boot.token, opts(boot)); code(err) != "403 wrong_role" {
			t.Fatal(code(err))
		}
	})

	revoked := b.ticket(cluster, enrollment, "ctrl-2", "https://10.0.0.12:2380")
	t.Run("revoked, as the broker says", func(t *testing.T) {
		if _, err := admission.Verify(ctx, revoked.token, opts(revoked)); err != nil {
			t.Fatal(err)
		}
		b.admin("POST", "/v1/admin/clusters/"+cluster+"/admissions/"+revoked.jti+"/revoke", map[string]any{"reason": "test"})
		if _, err := admission.Verify(ctx, revoked.token, opts(revoked)); code(err) != "410 admission_revoked" {
			t.Fatal(code(err))
		}
	})

	t.Run("completed, as the broker says", func(t *testing.T) {
		used := b.ticket(cluster, enrollment, "ctrl-3", "https://10.0.0.13:2380")
		b.complete(cluster, used, "1003")
		if _, err := admission.Verify(ctx, used.token, opts(used)); code(err) != "410 admission_completed" {
			t.Fatal(code(err))
		}
	})

	t.Run("a forgery: a kid the cluster has no key for", func(t *testing.T) {
		forged := forge(t, joiner.claims)
		if _, err := admission.Verify(ctx, forged, opts(joiner)); code(err) != "401 unknown_key" {
			t.Fatal(code(err))
		}
	})

	t.Run("another cluster's token", func(t *testing.T) {
		other := cluster + "-other"
		stranger := b.ticket(other, b.enroll(other), "ctrl-1", "https://10.0.0.11:2380")
		o := opts(stranger)
		o.Role = admission.RoleAny
		if _, err := admission.Verify(ctx, stranger.token, o); code(err) != "401 unknown_key" {
			t.Fatal(code(err))
		}
	})

	t.Run("a cluster the broker does not know", func(t *testing.T) {
		o := opts(joiner)
		o.Cluster, o.Trust = "no-such-cluster", nil
		_, err := admission.Verify(ctx, joiner.token, o)
		var refusal *admission.Error
		if !errors.As(err, &refusal) || refusal.Code != admission.InvalidToken || refusal.Reason != "unknown_cluster" {
			t.Fatal(code(err))
		}
	})

	t.Run("a rotated key is fetched on its unknown kid, once", func(t *testing.T) {
		before := fetches.jwks.Load()
		b.admin("POST", "/v1/admin/clusters/"+cluster+"/keys/rotate", nil)
		fresh := b.ticket(cluster, enrollment, "ctrl-4", "https://10.0.0.14:2380")
		if _, err := admission.Verify(ctx, fresh.token, opts(fresh)); err != nil {
			t.Fatal(err)
		}
		if _, err := admission.Verify(ctx, fresh.token, opts(fresh)); err != nil {
			t.Fatal(err)
		}
		if got := fetches.jwks.Load() - before; got != 1 {
			t.Fatalf("JWKS fetched %d times, want 1", got)
		}
		// Tokens of the retired key stay good until they expire.
		if _, err := admission.Verify(ctx, joiner.token, opts(joiner)); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("expired by the verifier's clock", func(t *testing.T) {
		o := opts(joiner)
		o.Now = func() time.Time { return joiner.claims.Expiry.Add(31 * time.Second) }
		if _, err := admission.Verify(ctx, joiner.token, o); code(err) != "410 token_expired" {
			t.Fatal(code(err))
		}
	})

	t.Run("when introspection cannot reach the broker", func(t *testing.T) {
		away, err := admission.NewTrust(admission.TrustOptions{Broker: b.url, Cluster: cluster, HTTPClient: &http.Client{Transport: &countingTransport{failIntrospection: true}}})
		if err != nil {
			t.Fatal(err)
		}
		o := opts(joiner)
		o.Trust = away
		if _, err := admission.Verify(ctx, joiner.token, o); code(err) != "503 broker_unavailable" {
			t.Fatal(code(err))
		}
		o.RevocationListFallback = time.Minute
		claims, err := admission.Verify(ctx, joiner.token, o)
		if err != nil || claims.ActiveBy != admission.ByRevocationList {
			t.Fatalf("%+v %v", claims, err)
		}
		r := opts(revoked)
		r.Trust, r.RevocationListFallback = away, time.Minute
		if _, err := admission.Verify(ctx, revoked.token, r); code(err) != "410 admission_revoked" {
			t.Fatal(code(err))
		}
	})

	t.Run("when the broker cannot be reached at all", func(t *testing.T) {
		o := opts(joiner)
		o.Broker, o.Trust = "http://127.0.0.1:1", nil
		o.Issuer = joiner.claims.Issuer
		if _, err := admission.Verify(ctx, joiner.token, o); code(err) != "503 broker_unavailable" {
			t.Fatal(code(err))
		}
	})
}

type countingTransport struct {
	jwks              atomic.Int64
	failIntrospection bool
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/jwks.json") {
		c.jwks.Add(1)
	}
	if c.failIntrospection && strings.HasSuffix(r.URL.Path, "/introspect") {
		return nil, errors.New("connection refused")
	}
	return http.DefaultTransport.RoundTrip(r)
}

type admitted struct {
	node, peer, ticket, token, jti string
	claims                         admission.Claims
	raw                            map[string]any
}

type liveBroker struct {
	t          *testing.T
	url, token string
}

func (b *liveBroker) call(method, path, bearer string, body any) (int, map[string]any) {
	b.t.Helper()
	var reader *bytes.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		reader = bytes.NewReader(raw)
	} else {
		reader = bytes.NewReader(nil)
	}
	req, _ := http.NewRequest(method, b.url+path, reader)
	req.Header.Set("Authorization", "Bearer "+bearer)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

func (b *liveBroker) admin(method, path string, body any) map[string]any {
	b.t.Helper()
	status, out := b.call(method, path, b.token, body)
	if status >= 300 {
		b.t.Fatalf("%s %s: %d %v", method, path, status, out)
	}
	return out
}

func (b *liveBroker) enroll(cluster string) string {
	return b.admin("POST", "/v1/admin/clusters/"+cluster+"/enrollment-tokens", map[string]any{})["token"].(string)
}

func (b *liveBroker) ticket(cluster, enrollment, node, peer string) admitted {
	b.t.Helper()
	status, out := b.call("POST", "/v1/clusters/"+cluster+"/tickets", enrollment, map[string]any{"node": node, "peerURL": peer})
	if out["state"] != "admitted" {
		b.t.Fatalf("ticket for %s: %d %v", node, status, out)
	}
	a := admitted{node: node, peer: peer, ticket: out["ticket"].(string), token: out["admission"].(string)}
	parts := strings.Split(a.token, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		b.t.Fatal(err)
	}
	_ = json.Unmarshal(payload, &a.raw)
	a.jti = a.raw["jti"].(string)
	a.claims = admission.Claims{Issuer: a.raw["iss"].(string), Subject: node, ID: a.jti, Expiry: time.Unix(int64(a.raw["exp"].(float64)), 0)}
	return a
}

func (b *liveBroker) complete(cluster string, a admitted, memberID string) {
	b.t.Helper()
	if status, out := b.call("POST", "/v1/clusters/"+cluster+"/tickets/"+a.ticket+"/complete", a.token, map[string]any{"memberID": memberID}); status != 200 {
		b.t.Fatalf("complete %s: %d %v", a.node, status, out)
	}
}

// forge signs the claims with a fresh Ed25519 key the broker never saw.
func forge(t *testing.T, c admission.Claims) string {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: jose.JSONWebKey{Key: key, KeyID: "forged-kid"}}, (&jose.SignerOptions{}).WithType("admission+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(map[string]any{"iss": c.Issuer, "sub": c.Subject, "jti": c.ID, "exp": c.Expiry.Unix()})
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}
