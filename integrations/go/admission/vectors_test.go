package admission_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/etcd-join-broker/etcd-join-broker/integrations/go/admission"
	"github.com/etcd-join-broker/etcd-join-broker/integrations/go/internal/vectorstest"
)

// The shared vectors (integrations/vectors/admission-vectors.json, made by scripts/vectors.mjs
// from a real broker); the TypeScript verifier is held to the same file.
type vectorFile struct {
	Broker      string             `json:"broker"`
	Cluster     string             `json:"cluster"`
	JWKS        jose.JSONWebKeySet `json:"jwks"`
	ForgerJWKS  jose.JSONWebKeySet `json:"forgerJwks"`
	Revocations json.RawMessage    `json:"revocations"`
	Cases       []vectorCase       `json:"cases"`
	PeerURLs    []struct {
		A    string `json:"a"`
		B    string `json:"b"`
		Same bool   `json:"same"`
	} `json:"peerURLs"`
}

type vectorCase struct {
	Name        string `json:"name"`
	Token       string `json:"token"`
	At          int64  `json:"at"`
	TrustForger bool   `json:"trustForger"`
	Request     struct {
		Node             string   `json:"node"`
		PeerURL          string   `json:"peerURL"`
		Role             string   `json:"role"`
		ClockSkewSeconds *float64 `json:"clockSkewSeconds"`
	} `json:"request"`
	Expect struct {
		OK     bool           `json:"ok"`
		Claims map[string]any `json:"claims"`
		Status int            `json:"status"`
		Code   string         `json:"code"`
	} `json:"expect"`
}

func loadVectors(t *testing.T) *vectorFile {
	t.Helper()
	var v vectorFile
	vectorstest.Read(t, &v)
	return &v
}

// offline is the broker as the verifier sees it offline: introspection unreachable, the
// recorded revocation list served.
type offline struct{ v *vectorFile }

func (o offline) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/v1/clusters/"+o.v.Cluster+"/revocations") {
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(string(o.v.Revocations))), Request: r}, nil
	}
	return nil, errors.New("connection refused")
}

func TestSharedVectors(t *testing.T) {
	v := loadVectors(t)
	seen := map[string]bool{}
	for _, c := range v.Cases {
		if c.Expect.OK {
			seen["ok"] = true
		} else {
			seen[c.Expect.Code] = true
		}
		t.Run(c.Name, func(t *testing.T) {
			keys := jose.JSONWebKeySet{Keys: append([]jose.JSONWebKey{}, v.JWKS.Keys...)}
			if c.TrustForger {
				keys.Keys = append(keys.Keys, v.ForgerJWKS.Keys...)
			}
			trust, err := admission.NewTrust(admission.TrustOptions{Broker: v.Broker, Cluster: v.Cluster, JWKS: &keys, HTTPClient: &http.Client{Transport: offline{v}}})
			if err != nil {
				t.Fatal(err)
			}
			opts := admission.Options{
				Broker:                 v.Broker,
				Cluster:                v.Cluster,
				Node:                   c.Request.Node,
				PeerURL:                c.Request.PeerURL,
				Role:                   admission.Role(c.Request.Role),
				RevocationListFallback: 60 * time.Second,
				Trust:                  trust,
				Now:                    func() time.Time { return time.Unix(c.At, 0) },
			}
			if c.Request.ClockSkewSeconds != nil {
				opts.ClockSkew = time.Duration(*c.Request.ClockSkewSeconds * float64(time.Second))
				if opts.ClockSkew == 0 {
					opts.ClockSkew = admission.NoClockSkew
				}
			}
			claims, err := admission.Verify(context.Background(), c.Token, opts)
			if !c.Expect.OK {
				var refusal *admission.Error
				if !errors.As(err, &refusal) {
					t.Fatalf("expected %d %s, got claims %+v, error %v", c.Expect.Status, c.Expect.Code, claims, err)
				}
				if string(refusal.Code) != c.Expect.Code || refusal.Status() != c.Expect.Status {
					t.Fatalf("expected %d %s, got %d %s (%v)", c.Expect.Status, c.Expect.Code, refusal.Status(), refusal.Code, refusal)
				}
				return
			}
			if err != nil {
				t.Fatalf("expected the token to pass, got %v", err)
			}
			if claims.ActiveBy != admission.ByRevocationList {
				t.Errorf("active by %s, want %s", claims.ActiveBy, admission.ByRevocationList)
			}
			got := map[string]any{"sub": claims.Subject, "jti": claims.ID, "role": string(claims.Role), "peer_url": claims.PeerURL, "ticket": claims.Ticket, "exp": float64(claims.Expiry.Unix())}
			for k, want := range c.Expect.Claims {
				if got[k] != want {
					t.Errorf("claim %s = %v, want %v", k, got[k], want)
				}
			}
		})
	}
	for _, code := range []string{"ok", "invalid_token", "unknown_key", "token_not_yet_valid", "wrong_node", "wrong_peer_url", "wrong_role", "token_expired", "admission_revoked", "admission_completed"} {
		if !seen[code] {
			t.Errorf("no vector expects %s", code)
		}
	}
}

// The verifier takes two peer URLs for the same peer exactly when the TypeScript one does.
func TestSharedPeerURLPairs(t *testing.T) {
	v := loadVectors(t)
	if len(v.PeerURLs) < 20 {
		t.Fatalf("only %d peer URL pairs", len(v.PeerURLs))
	}
	for _, p := range v.PeerURLs {
		if got := admission.CanonicalPeerURL(p.A) == admission.CanonicalPeerURL(p.B); got != p.Same {
			t.Errorf("%q and %q: same = %v, want %v (canonical %q, %q)", p.A, p.B, got, p.Same, admission.CanonicalPeerURL(p.A), admission.CanonicalPeerURL(p.B))
		}
	}
}
