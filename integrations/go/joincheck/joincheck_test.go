package joincheck_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcd-join-broker/etcd-join-broker/integrations/go/admission"
	"github.com/etcd-join-broker/etcd-join-broker/integrations/go/internal/vectorstest"
	"github.com/etcd-join-broker/etcd-join-broker/integrations/go/joincheck"
)

// logs records what a Checker logged, "info: …" and "warn: …".
type logs struct{ lines []string }

func (l *logs) Infof(format string, args ...any) {
	l.lines = append(l.lines, "info: "+fmt.Sprintf(format, args...))
}
func (l *logs) Warnf(format string, args ...any) {
	l.lines = append(l.lines, "warn: "+fmt.Sprintf(format, args...))
}

// checker is the Checker of the vectors' cluster; fallback 0 means introspection only (and the
// broker never answers).
func checker(t *testing.T, v *vectorstest.Vectors, fallback time.Duration, logged *logs) *joincheck.Checker {
	t.Helper()
	client := &http.Client{Transport: vectorstest.Offline{Revocations: string(v.Revocations)}}
	trust, err := admission.NewTrust(admission.TrustOptions{Broker: v.Broker, Cluster: v.Cluster, JWKS: &v.JWKS, HTTPClient: client})
	if err != nil {
		t.Fatal(err)
	}
	if logged == nil {
		logged = &logs{}
	}
	return joincheck.New(admission.Options{Broker: v.Broker, Cluster: v.Cluster, Trust: trust, RevocationListFallback: fallback, Now: func() time.Time { return time.Unix(v.VerifyAt, 0) }}, logged)
}

// k0sAPI stands for k0s's join API with the patch's two calls: Member before the etcd add (the
// add is recorded), CA before the CA keys.
type k0sAPI struct {
	check *joincheck.Checker
	added []string
}

func (a *k0sAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1beta1/etcd/members":
		var req struct{ Node, PeerAddress string }
		_ = json.NewDecoder(r.Body).Decode(&req)
		if !a.check.Member(w, r, req.Node, req.PeerAddress) {
			return
		}
		a.added = append(a.added, req.Node+"="+req.PeerAddress)
		_, _ = io.WriteString(w, `{"initialCluster":[]}`)
	case "/v1beta1/ca":
		if !a.check.CA(w, r) {
			return
		}
		_, _ = io.WriteString(w, `{"key":"…"}`)
	}
}

type answer struct {
	status      int
	contentType string
	retryAfter  string
	body        string
}

func call(t *testing.T, h http.Handler, method, path, admissionToken, body string, accept string) answer {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer abcdef.0123456789abcdef") // k0s's own token: not ours to check
	if admissionToken != "" {
		req.Header.Set(joincheck.Header, admissionToken)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return answer{rec.Code, rec.Header().Get("Content-Type"), rec.Header().Get("Retry-After"), rec.Body.String()}
}

func add(node, peer string) string {
	return `{"node":"` + node + `","peerAddress":"` + peer + `"}`
}

func TestAddsOnlyTheAdmittedNodeAtItsPeerURL(t *testing.T) {
	v := vectorstest.Load(t)
	api := &k0sAPI{check: checker(t, v, time.Minute, nil)}
	token, node, peer := v.Token(t, "a join token, bound to its node and peer")
	revoked, rnode, rpeer := v.Token(t, "revoked (on the revocation list)")
	completed, cnode, cpeer := v.Token(t, "completed (on the revocation list)")
	boot, bnode, bpeer := v.Token(t, "a bootstrap token at a join call")
	for _, c := range []struct {
		name, token, body string
		status            int
		code              string
	}{
		{"no admission", "", add(node, peer), 401, "admission_required"},
		{"another node", token, add("ctrl-9", peer), 403, "wrong_node"},
		{"another peer URL", token, add(node, "https://10.0.0.99:2380"), 403, "wrong_peer_url"},
		{"revoked", revoked, add(rnode, rpeer), 410, "admission_revoked"},
		{"completed", completed, add(cnode, cpeer), 410, "admission_completed"},
		{"the bootstrap node's", boot, add(bnode, bpeer), 403, "wrong_role"},
		{"not a JWT", "x.y.z", add(node, peer), 401, "invalid_token"},
	} {
		got := call(t, api, http.MethodPost, "/v1beta1/etcd/members", c.token, c.body, "application/json")
		if got.status != c.status || !strings.HasPrefix(got.body, c.code+": ") || !strings.HasPrefix(got.contentType, "text/plain") {
			t.Errorf("%s: got %d %q %q, want %d %s", c.name, got.status, got.contentType, got.body, c.status, c.code)
		}
	}
	if len(api.added) != 0 {
		t.Fatalf("refused requests added members: %v", api.added)
	}
	got := call(t, api, http.MethodPost, "/v1beta1/etcd/members", token, add(node, peer), "")
	if got.status != 200 || len(api.added) != 1 || api.added[0] != node+"="+peer {
		t.Fatalf("the admitted node: got %d %q, added %v", got.status, got.body, api.added)
	}
}

func TestTheRefusalSaysWhatToSend(t *testing.T) {
	v := vectorstest.Load(t)
	api := &k0sAPI{check: checker(t, v, time.Minute, nil)}
	got := call(t, api, http.MethodPost, "/v1beta1/etcd/members", "", add("ctrl-1", "https://10.0.0.11:2380"), "")
	want := "admission_required: this join API gives an etcd member for ctrl-1 only to a node the join broker admitted: send its admission token (JOIN_BROKER_ADMISSION) in the Join-Broker-Admission header\n"
	if got.status != 401 || got.body != want {
		t.Fatalf("got %d %q", got.status, got.body)
	}
	token, _, peer := v.Token(t, "a join token, bound to its node and peer")
	got = call(t, api, http.MethodPost, "/v1beta1/etcd/members", token, add("ctrl-9", peer), "")
	if got.body != "wrong_node: the admission token is for node ctrl-1, not ctrl-9\n" {
		t.Fatalf("got %q", got.body)
	}
}

func TestItLogsRefusalsAsWarningsAndAdmissionsAsInformation(t *testing.T) {
	v := vectorstest.Load(t)
	logged := &logs{}
	api := &k0sAPI{check: checker(t, v, time.Minute, logged)}
	token, node, peer := v.Token(t, "a join token, bound to its node and peer")
	call(t, api, http.MethodPost, "/v1beta1/etcd/members", "", add(node, peer), "")
	call(t, api, http.MethodPost, "/v1beta1/etcd/members", token, add("ctrl-9", peer), "")
	call(t, api, http.MethodGet, "/v1beta1/ca", "", "", "")
	call(t, api, http.MethodPost, "/v1beta1/etcd/members", token, add(node, peer), "")
	want := []string{
		"info: join broker admission check on: etcd members are added only for a node admitted by " + v.Broker + " for cluster " + v.Cluster,
		"warn: join broker admission check refused an etcd member for ctrl-1 at https://10.0.0.11:2380: no Join-Broker-Admission header",
		"warn: join broker admission check refused an etcd member for ctrl-9 at https://10.0.0.11:2380: wrong_node: the admission token is for node ctrl-1, not ctrl-9",
		"warn: join broker admission check refused the cluster's CA: no Join-Broker-Admission header",
		"info: join broker admission adm_8JOgLmkAqa81vJxHJGaA (ticket tkt_kFxYroHI3LYqkK2t) admits ctrl-1 at https://10.0.0.11:2380",
	}
	if strings.Join(logged.lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("logged:\n%s\nwant:\n%s", strings.Join(logged.lines, "\n"), strings.Join(want, "\n"))
	}
}

func TestProblemJSONForAClientThatAsks(t *testing.T) {
	v := vectorstest.Load(t)
	api := &k0sAPI{check: checker(t, v, time.Minute, nil)}
	token, node, _ := v.Token(t, "a join token, bound to its node and peer")
	got := call(t, api, http.MethodPost, "/v1beta1/etcd/members", token, add(node, "https://10.0.0.99:2380"), "application/json, application/problem+json")
	var problem map[string]any
	if err := json.Unmarshal([]byte(got.body), &problem); err != nil {
		t.Fatalf("%q: %v", got.body, err)
	}
	if got.status != 403 || got.contentType != "application/problem+json" || problem["code"] != "wrong_peer_url" || problem["status"] != float64(403) || !strings.Contains(problem["detail"].(string), "10.0.0.99") {
		t.Fatalf("got %d %q %v", got.status, got.contentType, problem)
	}
}

func TestNoBrokerIs503WithRetryAfterAndAddsNothing(t *testing.T) {
	v := vectorstest.Load(t)
	api := &k0sAPI{check: checker(t, v, 0, nil)} // introspection required, and the broker does not answer
	token, node, peer := v.Token(t, "a join token, bound to its node and peer")
	got := call(t, api, http.MethodPost, "/v1beta1/etcd/members", token, add(node, peer), "")
	if got.status != 503 || got.retryAfter == "" || !strings.HasPrefix(got.body, "broker_unavailable: ") || len(api.added) != 0 {
		t.Fatalf("got %+v, added %v", got, api.added)
	}
}

func TestTheCAGoesOnlyToAHolderOfACurrentJoinAdmission(t *testing.T) {
	v := vectorstest.Load(t)
	api := &k0sAPI{check: checker(t, v, time.Minute, nil)}
	token, _, _ := v.Token(t, "a join token, bound to its node and peer")
	other, _, _ := v.Token(t, "a token signed with the rotated (newer) key")
	revoked, _, _ := v.Token(t, "revoked (on the revocation list)")
	boot, _, _ := v.Token(t, "a bootstrap token at a join call")
	forged, _, _ := v.Token(t, "a tampered payload (another node)")
	for _, c := range []struct {
		name, token string
		status      int
		code        string
	}{
		{"no admission", "", 401, "admission_required"},
		{"revoked", revoked, 410, "admission_revoked"},
		{"the bootstrap node's", boot, 403, "wrong_role"},
		// The node is read from the token before its signature is checked: a payload changed to
		// another node fails the signature all the same.
		{"a tampered payload", forged, 401, "invalid_token"},
		{"not a JWT", "not-a-jwt", 401, "invalid_token"},
	} {
		got := call(t, api, http.MethodGet, "/v1beta1/ca", c.token, "", "")
		if got.status != c.status || !strings.HasPrefix(got.body, c.code+": ") {
			t.Errorf("%s: got %d %q, want %d %s", c.name, got.status, got.body, c.status, c.code)
		}
	}
	for _, tok := range []string{token, other} {
		if got := call(t, api, http.MethodGet, "/v1beta1/ca", tok, "", ""); got.status != 200 {
			t.Errorf("a current join admission: got %d %q", got.status, got.body)
		}
	}
}

func TestANilCheckerChecksNothing(t *testing.T) {
	api := &k0sAPI{}
	if got := call(t, api, http.MethodPost, "/v1beta1/etcd/members", "", add("ctrl-1", "https://10.0.0.11:2380"), ""); got.status != 200 || len(api.added) != 1 {
		t.Fatalf("members: got %+v", got)
	}
	if got := call(t, api, http.MethodGet, "/v1beta1/ca", "", "", ""); got.status != 200 {
		t.Fatalf("ca: got %+v", got)
	}
}

func TestFromEnv(t *testing.T) {
	t.Run("without JOIN_BROKER_URL nothing is checked", func(t *testing.T) {
		t.Setenv(joincheck.EnvBroker, "")
		t.Setenv(joincheck.EnvCluster, "prod-eu")
		if c := joincheck.FromEnv(nil); c != nil {
			t.Fatalf("got a checker: %+v", c)
		}
	})
	misconfigured := func(t *testing.T, wantInBody string) {
		t.Helper()
		logged := &logs{}
		api := &k0sAPI{check: joincheck.FromEnv(logged)}
		if api.check == nil {
			t.Fatal("no checker")
		}
		for _, path := range []string{"/v1beta1/etcd/members", "/v1beta1/ca"} {
			got := call(t, api, http.MethodPost, path, "x.y.z", add("ctrl-1", "https://10.0.0.11:2380"), "")
			if got.status != 503 || got.retryAfter == "" || !strings.HasPrefix(got.body, "admission_check_misconfigured: ") || !strings.Contains(got.body, wantInBody) {
				t.Fatalf("%s: got %+v", path, got)
			}
		}
		if len(api.added) != 0 || len(logged.lines) != 1 || !strings.HasPrefix(logged.lines[0], "warn: join broker admission check misconfigured: ") {
			t.Fatalf("added %v, logged %v", api.added, logged.lines)
		}
	}
	t.Run("a broker without a cluster refuses everything, saying why", func(t *testing.T) {
		t.Setenv(joincheck.EnvBroker, "https://join.example.com")
		t.Setenv(joincheck.EnvCluster, "")
		misconfigured(t, "JOIN_BROKER_CLUSTER names no cluster")
	})
	t.Run("a broker that is not a URL", func(t *testing.T) {
		t.Setenv(joincheck.EnvBroker, "join.example.com")
		t.Setenv(joincheck.EnvCluster, "prod-eu")
		misconfigured(t, `JOIN_BROKER_URL="join.example.com" is not an http(s) URL`)
	})
	t.Run("a CA file that is not there", func(t *testing.T) {
		t.Setenv(joincheck.EnvBroker, "https://join.example.com")
		t.Setenv(joincheck.EnvCluster, "prod-eu")
		t.Setenv(joincheck.EnvCAFile, filepath.Join(t.TempDir(), "missing.pem"))
		misconfigured(t, "JOIN_BROKER_CA_FILE")
	})
	t.Run("a CA file without a certificate", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "empty.pem")
		_ = os.WriteFile(file, []byte("not a certificate\n"), 0o600)
		t.Setenv(joincheck.EnvBroker, "https://join.example.com")
		t.Setenv(joincheck.EnvCluster, "prod-eu")
		t.Setenv(joincheck.EnvCAFile, file)
		misconfigured(t, "holds no PEM certificate")
	})
	t.Run("a broker and a cluster: the broker is asked", func(t *testing.T) {
		asked := make(chan string, 4)
		broker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			asked <- r.URL.Path
			w.WriteHeader(http.StatusNotFound)
		}))
		defer broker.Close()
		t.Setenv(joincheck.EnvBroker, broker.URL)
		t.Setenv(joincheck.EnvCluster, "prod-eu")
		t.Setenv(joincheck.EnvCAFile, "")
		v := vectorstest.Load(t)
		token, node, peer := v.Token(t, "a join token, bound to its node and peer")
		api := &k0sAPI{check: joincheck.FromEnv(&logs{})}
		got := call(t, api, http.MethodPost, "/v1beta1/etcd/members", token, add(node, peer), "")
		// A broker that does not know the cluster: the token is not one of its admissions.
		if got.status != 401 || !strings.HasPrefix(got.body, "invalid_token: ") || len(api.added) != 0 {
			t.Fatalf("got %+v", got)
		}
		if path := <-asked; path != "/v1/clusters/prod-eu/jwks.json" {
			t.Fatalf("asked %s", path)
		}
	})
}

func TestTheJoiningSide(t *testing.T) {
	h := http.Header{}
	t.Setenv(joincheck.EnvAdmission, "")
	joincheck.SetHeader(h)
	if _, ok := h[joincheck.Header]; ok {
		t.Fatalf("set without an admission: %v", h)
	}
	t.Setenv(joincheck.EnvAdmission, " eyJ.a.b\n")
	joincheck.SetHeader(h)
	if h.Get(joincheck.Header) != "eyJ.a.b" {
		t.Fatalf("got %v", h)
	}
	res := &http.Response{Body: io.NopCloser(strings.NewReader("wrong_node: the admission token is for node a, not b\nmore\n"))}
	if d := joincheck.Detail(res); d != ": wrong_node: the admission token is for node a, not b" {
		t.Fatalf("got %q", d)
	}
	if d := joincheck.Detail(&http.Response{Body: io.NopCloser(strings.NewReader(" \n"))}); d != "" {
		t.Fatalf("got %q", d)
	}
}
