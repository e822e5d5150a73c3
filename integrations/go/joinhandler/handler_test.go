package joinhandler_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/etcd-join-broker/etcd-join-broker/integrations/go/admission"
	"github.com/etcd-join-broker/etcd-join-broker/integrations/go/internal/vectorstest"
	"github.com/etcd-join-broker/etcd-join-broker/integrations/go/joinhandler"
)

// The handler with the shared vectors' keys and revocation list (offline), and a Members that
// records what it was asked to add.
type recorder struct {
	mu      sync.Mutex
	added   []string
	err     error
	started bool
}

func (r *recorder) AddLearner(_ context.Context, node, peerURL string) (joinhandler.Member, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return joinhandler.Member{}, r.err
	}
	r.added = append(r.added, node+"="+peerURL)
	return joinhandler.Member{ID: 10501334649042878790, Learner: true, Started: r.started, InitialCluster: []string{"ctrl-0=https://10.0.0.10:2380", node + "=" + peerURL}}, nil
}

func setup(t *testing.T, fallback time.Duration) (*vectorstest.Vectors, *recorder, *httptest.Server) {
	t.Helper()
	v := vectorstest.Load(t)
	trust, err := admission.NewTrust(admission.TrustOptions{Broker: v.Broker, Cluster: v.Cluster, JWKS: &v.JWKS, HTTPClient: &http.Client{Transport: vectorstest.Offline{Revocations: string(v.Revocations)}}})
	if err != nil {
		t.Fatal(err)
	}
	members := &recorder{}
	h := &joinhandler.Handler{
		Verify:  admission.Options{Broker: v.Broker, Cluster: v.Cluster, Trust: trust, RevocationListFallback: fallback, Now: func() time.Time { return time.Unix(v.VerifyAt, 0) }},
		Members: members,
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return v, members, srv
}

func post(t *testing.T, srv *httptest.Server, token, body string) (int, map[string]any, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1beta1/etcd/members", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out, res.Header
}

func TestAddsTheAdmittedNodeAsALearner(t *testing.T) {
	v, members, srv := setup(t, time.Minute)
	token, node, peer := v.Token(t, "a join token, bound to its node and peer")
	status, body, _ := post(t, srv, token, `{"node":"`+node+`","peerAddress":"`+peer+`"}`)
	if status != 200 || body["memberID"] != "10501334649042878790" || body["learner"] != true || body["started"] != false {
		t.Fatalf("got %d %v", status, body)
	}
	if len(members.added) != 1 || members.added[0] != node+"="+peer {
		t.Fatalf("added %v", members.added)
	}
}

func TestARefusedTokenNeverReachesEtcd(t *testing.T) {
	v, members, srv := setup(t, time.Minute)
	token, node, peer := v.Token(t, "a join token, bound to its node and peer")
	revoked, rnode, rpeer := v.Token(t, "revoked (on the revocation list)")
	boot, bnode, bpeer := v.Token(t, "a bootstrap token at a join call")
	for _, c := range []struct {
		token, body, code string
		status            int
	}{
		{token, `{"node":"ctrl-9","peerAddress":"` + peer + `"}`, "wrong_node", 403},
		{token, `{"node":"` + node + `","peerAddress":"https://10.0.0.99:2380"}`, "wrong_peer_url", 403},
		{revoked, `{"node":"` + rnode + `","peerAddress":"` + rpeer + `"}`, "admission_revoked", 410},
		{boot, `{"node":"` + bnode + `","peerAddress":"` + bpeer + `"}`, "wrong_role", 403},
		{"x.y.z", `{"node":"` + node + `","peerAddress":"` + peer + `"}`, "invalid_token", 401},
	} {
		status, body, _ := post(t, srv, c.token, c.body)
		if status != c.status || body["code"] != c.code {
			t.Errorf("%s: got %d %v", c.code, status, body)
		}
	}
	if len(members.added) != 0 {
		t.Fatalf("refused requests added members: %v", members.added)
	}
}

func TestNoBrokerMeans503WithRetryAfter(t *testing.T) {
	v, members, srv := setup(t, 0) // no revocation list fallback: introspection is required
	token, node, peer := v.Token(t, "a join token, bound to its node and peer")
	status, body, header := post(t, srv, token, `{"node":"`+node+`","peerAddress":"`+peer+`"}`)
	if status != 503 || body["code"] != "broker_unavailable" || header.Get("Retry-After") == "" {
		t.Fatalf("got %d %v %v", status, body, header)
	}
	if len(members.added) != 0 {
		t.Fatalf("added %v", members.added)
	}
}

func TestEtcdNotNowIs503NotA500(t *testing.T) {
	v, members, srv := setup(t, time.Minute)
	members.err = &joinhandler.NotNow{Code: "etcd_unhealthy", RetryAfter: time.Second, Err: errors.New("etcdserver: unhealthy cluster")}
	token, node, peer := v.Token(t, "a join token, bound to its node and peer")
	status, body, header := post(t, srv, token, `{"node":"`+node+`","peerAddress":"`+peer+`"}`)
	if status != 503 || body["code"] != "etcd_unhealthy" || header.Get("Retry-After") != "1" {
		t.Fatalf("got %d %v %v", status, body, header)
	}
}
