package admission_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etcd-join-broker/etcd-join-broker/integrations/go/admission"
)

// A stand-in broker on loopback serving the vectors' JWKS and revocation list, counting calls;
// introspection answers 503 (as a broker mid-restart would).
type fakeBroker struct {
	*httptest.Server
	jwks, revocations atomic.Int64
	notModified       atomic.Int64
	jwksStatus        atomic.Int64
}

func newFakeBroker(t *testing.T, v *vectorFile) *fakeBroker {
	f := &fakeBroker{}
	f.jwksStatus.Store(200)
	keys, _ := json.Marshal(v.JWKS)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/clusters/{cluster}/jwks.json", func(w http.ResponseWriter, r *http.Request) {
		f.jwks.Add(1)
		if status := int(f.jwksStatus.Load()); status != 200 {
			http.Error(w, "no", status)
			return
		}
		w.Write(keys)
	})
	mux.HandleFunc("GET /v1/clusters/{cluster}/revocations", func(w http.ResponseWriter, r *http.Request) {
		f.revocations.Add(1)
		if r.Header.Get("If-None-Match") == `W/"v1"` {
			f.notModified.Add(1)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", `W/"v1"`)
		w.Write(v.Revocations)
	})
	mux.HandleFunc("POST /v1/clusters/{cluster}/admissions/introspect", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "restarting", http.StatusServiceUnavailable)
	})
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Close)
	return f
}

func caseNamed(t *testing.T, v *vectorFile, name string) vectorCase {
	for _, c := range v.Cases {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no vector %q", name)
	return vectorCase{}
}

func codeOf(err error) admission.Code {
	var refusal *admission.Error
	if errors.As(err, &refusal) {
		return refusal.Code
	}
	return ""
}

func TestRevocationListIsFetchedConditionally(t *testing.T) {
	v := loadVectors(t)
	f := newFakeBroker(t, v)
	trust, err := admission.NewTrust(admission.TrustOptions{Broker: f.URL, Cluster: v.Cluster})
	if err != nil {
		t.Fatal(err)
	}
	first, err := trust.RefreshRevocations(context.Background(), time.Unix(100, 0))
	if err != nil || first.ETag != `W/"v1"` || len(first.Revoked) == 0 {
		t.Fatalf("%+v %v", first, err)
	}
	again, err := trust.RefreshRevocations(context.Background(), time.Unix(200, 0))
	if err != nil || f.notModified.Load() != 1 || !again.FetchedAt.Equal(time.Unix(200, 0)) || len(again.Revoked) != len(first.Revoked) {
		t.Fatalf("%+v %v (304s: %d)", again, err, f.notModified.Load())
	}
}

func TestFallbackRefusesAStaleList(t *testing.T) {
	v := loadVectors(t)
	f := newFakeBroker(t, v)
	c := caseNamed(t, v, "a join token, bound to its node and peer")
	trust, _ := admission.NewTrust(admission.TrustOptions{Broker: f.URL, Cluster: v.Cluster, JWKS: &v.JWKS})
	at := time.Unix(c.At, 0)
	opts := admission.Options{Broker: v.Broker, Cluster: v.Cluster, Node: c.Request.Node, PeerURL: c.Request.PeerURL, Trust: trust, Now: func() time.Time { return at }}
	// Introspection answers 503: without the fallback, no admission.
	if _, err := admission.Verify(context.Background(), c.Token, opts); codeOf(err) != admission.BrokerUnavailable {
		t.Fatalf("got %v", err)
	}
	opts.RevocationListFallback = time.Minute
	claims, err := admission.Verify(context.Background(), c.Token, opts)
	if err != nil || claims.ActiveBy != admission.ByRevocationList {
		t.Fatalf("%+v %v", claims, err)
	}
	// The broker goes away entirely: the list held is used while it is young enough, then not.
	f.Close()
	at = at.Add(50 * time.Second)
	if _, err := admission.Verify(context.Background(), c.Token, opts); err != nil {
		t.Fatalf("a 50 s old list: %v", err)
	}
	at = at.Add(20 * time.Second)
	_, err = admission.Verify(context.Background(), c.Token, opts)
	var refusal *admission.Error
	if !errors.As(err, &refusal) || refusal.Code != admission.BrokerUnavailable || refusal.Reason != "revocation_list_stale" {
		t.Fatalf("a 70 s old list: %v", err)
	}
}

func TestJWKSCacheAndCooldown(t *testing.T) {
	v := loadVectors(t)
	f := newFakeBroker(t, v)
	ok := caseNamed(t, v, "a join token, bound to its node and peer")
	stranger := caseNamed(t, v, "a kid no key of the cluster has")
	trust, _ := admission.NewTrust(admission.TrustOptions{Broker: f.URL, Cluster: v.Cluster, JWKSCooldown: time.Hour})
	opts := admission.Options{Broker: v.Broker, Cluster: v.Cluster, Node: ok.Request.Node, PeerURL: ok.Request.PeerURL, Trust: trust, ActiveCheck: admission.NoActiveCheck, Now: func() time.Time { return time.Unix(ok.At, 0) }}
	for i := 0; i < 3; i++ {
		if _, err := admission.Verify(context.Background(), ok.Token, opts); err != nil {
			t.Fatal(err)
		}
	}
	// Unknown kids within the cooldown do not make the broker fetch again.
	for i := 0; i < 3; i++ {
		if _, err := admission.Verify(context.Background(), stranger.Token, opts); codeOf(err) != admission.UnknownKey {
			t.Fatalf("got %v", err)
		}
	}
	if n := f.jwks.Load(); n != 1 {
		t.Fatalf("JWKS fetched %d times, want 1", n)
	}
	// Without a cooldown, each unknown kid refetches once.
	eager, _ := admission.NewTrust(admission.TrustOptions{Broker: f.URL, Cluster: v.Cluster, JWKSCooldown: -1})
	opts.Trust = eager
	if _, err := admission.Verify(context.Background(), stranger.Token, opts); codeOf(err) != admission.UnknownKey {
		t.Fatalf("got %v", err)
	}
	if n := f.jwks.Load(); n != 3 {
		t.Fatalf("JWKS fetched %d times in all, want 3", n)
	}
}

func TestJWKSAnswers(t *testing.T) {
	v := loadVectors(t)
	f := newFakeBroker(t, v)
	c := caseNamed(t, v, "a join token, bound to its node and peer")
	for status, want := range map[int64]string{404: "invalid_token unknown_cluster", 500: "broker_unavailable jwks"} {
		f.jwksStatus.Store(status)
		trust, _ := admission.NewTrust(admission.TrustOptions{Broker: f.URL, Cluster: v.Cluster})
		_, err := admission.Verify(context.Background(), c.Token, admission.Options{Broker: v.Broker, Cluster: v.Cluster, Node: c.Request.Node, Trust: trust, Now: func() time.Time { return time.Unix(c.At, 0) }})
		var refusal *admission.Error
		if !errors.As(err, &refusal) || string(refusal.Code)+" "+refusal.Reason != want {
			t.Errorf("JWKS %d: got %v, want %s", status, err, want)
		}
	}
	if !strings.Contains(f.URL, "127.0.0.1") {
		t.Fatalf("not on loopback: %s", f.URL)
	}
}

func TestIntrospectCountsTheLeaseOnTheBrokersClock(t *testing.T) {
	answers := map[string]string{
		"lease": `{"active": true, "claims": {"sub": "ctrl-2"}, "leaseExpiresAt": "2026-12-03T10:00:30.000Z"}`,
		"none":  `{"active": true, "claims": {"sub": "ctrl-2"}}`,
	}
	var which atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The broker's clock says 10:00:00, whatever this machine's says.
		w.Header().Set("Date", "Thu, 03 Dec 2026 10:00:00 GMT")
		w.Write([]byte(answers[which.Load().(string)]))
	}))
	defer srv.Close()
	trust, _ := admission.NewTrust(admission.TrustOptions{Broker: srv.URL, Cluster: "c"})
	which.Store("lease")
	answer, err := trust.Introspect(context.Background(), "t")
	if err != nil || !answer.Active || answer.LeaseRemaining == nil || *answer.LeaseRemaining != 29*time.Second+time.Millisecond {
		t.Fatalf("%+v %v", answer, err)
	}
	which.Store("none")
	answer, err = trust.Introspect(context.Background(), "t")
	if err != nil || !answer.Active || answer.LeaseRemaining != nil {
		t.Fatalf("%+v %v", answer, err)
	}
}
