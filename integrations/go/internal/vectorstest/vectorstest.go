// Package vectorstest gives the Go tests the shared admission vectors
// (vectors/admission-vectors.json: a real broker's keys, tokens and revocation list) and the broker
// as those tests see it offline: introspection unreachable, the recorded revocation list served.
package vectorstest

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

// Vectors is what the tests read of the vectors file.
type Vectors struct {
	Broker      string             `json:"broker"`
	Cluster     string             `json:"cluster"`
	JWKS        jose.JSONWebKeySet `json:"jwks"`
	Revocations json.RawMessage    `json:"revocations"`
	// VerifyAt is the vectors' own time (Unix seconds): their tokens are checked as of then.
	VerifyAt int64  `json:"verifyAt"`
	Cases    []Case `json:"cases"`
}

// Case is one token and the request it comes with.
type Case struct {
	Name    string `json:"name"`
	Token   string `json:"token"`
	Request struct {
		Node    string `json:"node"`
		PeerURL string `json:"peerURL"`
	} `json:"request"`
}

// Load reads integrations/vectors/admission-vectors.json of this checkout.
func Load(t testing.TB) *Vectors {
	t.Helper()
	var v Vectors
	Read(t, &v)
	return &v
}

// Read decodes the same file into a test's own shape of it (one that also reads the expectations).
func Read(t testing.TB, into any) {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(here), "..", "..", "..", "vectors", "admission-vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, into); err != nil {
		t.Fatal(err)
	}
}

// Token is the named case's token, node and peer URL.
func (v *Vectors) Token(t testing.TB, name string) (token, node, peerURL string) {
	t.Helper()
	for _, c := range v.Cases {
		if c.Name == name {
			return c.Token, c.Request.Node, c.Request.PeerURL
		}
	}
	t.Fatalf("no vector %q", name)
	return "", "", ""
}

// Offline is the broker offline: its revocation list (when not empty) served, every other call refused.
type Offline struct{ Revocations string }

// RoundTrip answers `…/revocations` with the list and refuses the rest as an unreachable broker would.
func (o Offline) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/revocations") && o.Revocations != "" {
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(o.Revocations)), Header: http.Header{}, Request: r}, nil
	}
	return nil, errors.New("connection refused")
}
