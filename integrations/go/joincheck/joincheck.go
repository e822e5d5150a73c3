// Package joincheck puts the broker's admission check into a join API that already has
// authentication of its own: k0s's `k0s api`, whose POST /v1beta1/etcd/members and GET
// /v1beta1/ca take k0s's join token as their bearer. The admission token then travels in a
// header of its own, Join-Broker-Admission, beside k0s's Authorization.
//
// Both sides are configured by their environment, so that a patch to the join API stays a few
// lines (integrations/k0s/<version>/broker/):
//
//   - the join API (every controller): JOIN_BROKER_URL and JOIN_BROKER_CLUSTER name the broker
//     and the cluster whose admissions it accepts; JOIN_BROKER_CA_FILE, if set, is a PEM file of
//     CAs to trust for the broker's HTTPS besides the system's. Without JOIN_BROKER_URL, FromEnv
//     returns nil and every check passes: the join API behaves as released. The agent's gate mode
//     exports JOIN_BROKER_URL and JOIN_BROKER_CLUSTER to the installer it runs, so a controller
//     started by `join-broker join --exec 'k0s controller …'` checks without more configuration.
//   - the joining node: JOIN_BROKER_ADMISSION, which the agent's gate mode exports to the
//     installer once the node is admitted; SetHeader copies it into a request.
//
// Member checks that the admission is the current one of the node that asks, for the peer URL it
// asks to add (admission.Verify: signature by the cluster's key from the broker's JWKS, claims,
// sub = node, peer_url = peer URL, role join, introspection with the broker) before the join API
// adds an etcd member. CA checks that the caller holds a current join admission (of any node:
// k0s's CA request names none) before the join API hands out the cluster's CA keys.
//
// A refusal never reaches etcd and is never a 500: 401 (no admission, or not a valid one), 403
// (valid, for another node, peer URL or role), 410 (no longer active), 503 with Retry-After (the
// broker cannot be asked, or the check is misconfigured). The body is one line of text, "code:
// reason", which k0s's join client shows in its error; a client that asks for
// application/problem+json gets RFC 9457 JSON with the same code and detail.
package joincheck

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"strings"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/etcd-join-broker/etcd-join-broker/integrations/go/admission"
)

// Header carries the admission token on a request to the join API.
const Header = "Join-Broker-Admission"

// The environment variables joincheck reads.
const (
	EnvBroker    = "JOIN_BROKER_URL"
	EnvCluster   = "JOIN_BROKER_CLUSTER"
	EnvCAFile    = "JOIN_BROKER_CA_FILE"
	EnvAdmission = "JOIN_BROKER_ADMISSION"
)

// AdmissionRequired is the code of a refusal for a request that carries no admission token.
const AdmissionRequired = "admission_required"

// Misconfigured is the code of every refusal by a Checker whose configuration is wrong.
const Misconfigured = "admission_check_misconfigured"

// Logger is where a Checker says what it did: refusals and a wrong configuration as warnings, the
// admissions that let a member in as information. logrus's Logger and FieldLogger are Loggers.
type Logger interface {
	Infof(format string, args ...any)
	Warnf(format string, args ...any)
}

// Checker checks the admission of requests to a join API. A nil *Checker checks nothing.
type Checker struct {
	opts admission.Options
	err  error
	log  Logger
}

// New makes a Checker that verifies with opts (Broker and Cluster required; Node, PeerURL and
// Role are filled per request). log, if not nil, is told of every refusal and admission.
func New(opts admission.Options, log Logger) *Checker {
	c := &Checker{opts: opts, log: log}
	if opts.Cluster == "" {
		c.err = fmt.Errorf("%s names the broker but %s names no cluster", EnvBroker, EnvCluster)
	} else if u, err := url.Parse(opts.Broker); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		c.err = fmt.Errorf("%s=%q is not an http(s) URL", EnvBroker, opts.Broker)
	} else if opts.Trust == nil {
		trust, err := admission.NewTrust(admission.TrustOptions{Broker: opts.Broker, Cluster: opts.Cluster, HTTPClient: opts.HTTPClient})
		if err != nil {
			c.err = err
		}
		c.opts.Trust = trust
	}
	if c.err != nil {
		c.warnf("join broker admission check misconfigured: %v: every etcd member add and CA request is refused (503) until it is fixed", c.err)
	} else {
		c.infof("join broker admission check on: etcd members are added only for a node admitted by %s for cluster %s", opts.Broker, opts.Cluster)
	}
	return c
}

// FromEnv makes the Checker that JOIN_BROKER_URL, JOIN_BROKER_CLUSTER and JOIN_BROKER_CA_FILE
// describe, or returns nil when JOIN_BROKER_URL is not set (nothing is checked). A wrong value
// makes a Checker that refuses everything with 503 and says why (logged now, and in each answer).
func FromEnv(log Logger) *Checker {
	broker := strings.TrimSpace(os.Getenv(EnvBroker))
	if broker == "" {
		return nil
	}
	opts := admission.Options{Broker: broker, Cluster: strings.TrimSpace(os.Getenv(EnvCluster))}
	if file := os.Getenv(EnvCAFile); file != "" {
		client, err := clientTrusting(file)
		if err != nil {
			c := &Checker{opts: opts, err: err, log: log}
			c.warnf("join broker admission check misconfigured: %v: every etcd member add and CA request is refused (503) until it is fixed", err)
			return c
		}
		opts.HTTPClient = client
	}
	return New(opts, log)
}

// clientTrusting is an HTTP client that trusts the system's CAs and those of a PEM file.
func clientTrusting(file string) (*http.Client, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvCAFile, err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s=%s holds no PEM certificate", EnvCAFile, file)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: transport}, nil
}

// Member checks that r carries the current admission of node to add its etcd member at peerURL.
// It returns true if so (and writes nothing); otherwise it answers r and returns false.
func (c *Checker) Member(w http.ResponseWriter, r *http.Request, node, peerURL string) bool {
	if c == nil {
		return true
	}
	claims, ok := c.check(w, r, node, peerURL, func(string) string { return node })
	if ok {
		c.infof("join broker admission %s (ticket %s) admits %s at %s", claims.ID, claims.Ticket, node, peerURL)
	}
	return ok
}

// CA checks that r carries a current join admission (of any node) before the cluster's CA keys
// are handed out. It returns true if so; otherwise it answers r and returns false.
func (c *Checker) CA(w http.ResponseWriter, r *http.Request) bool {
	if c == nil {
		return true
	}
	// The request names no node: the token's own sub is the node it is checked for (its signature
	// is verified all the same), with no peer URL to bind.
	_, ok := c.check(w, r, "", "", unverifiedSubject)
	return ok
}

func (c *Checker) check(w http.ResponseWriter, r *http.Request, node, peerURL string, nodeOf func(token string) string) (*admission.Claims, bool) {
	what := "an etcd member for " + node + " at " + peerURL
	if node == "" {
		what = "the cluster's CA"
	}
	if c.err != nil {
		refuse(w, r, http.StatusServiceUnavailable, Misconfigured, "the join API's admission check is misconfigured: "+c.err.Error())
		return nil, false
	}
	token := strings.TrimSpace(r.Header.Get(Header))
	if token == "" {
		c.warnf("join broker admission check refused %s: no %s header", what, Header)
		refuse(w, r, http.StatusUnauthorized, AdmissionRequired, "this join API gives "+strings.TrimSuffix(what, " at "+peerURL)+" only to a node the join broker admitted: send its admission token ("+EnvAdmission+") in the "+Header+" header")
		return nil, false
	}
	opts := c.opts
	opts.Node, opts.PeerURL, opts.Role = nodeOf(token), peerURL, admission.RoleJoin
	claims, err := admission.Verify(r.Context(), token, opts)
	var refusal *admission.Error
	if errors.As(err, &refusal) {
		c.warnf("join broker admission check refused %s: %v", what, refusal)
		refuse(w, r, refusal.Status(), string(refusal.Code), refusal.Message)
		return nil, false
	} else if err != nil {
		c.warnf("join broker admission check failed: %v", err)
		refuse(w, r, http.StatusServiceUnavailable, Misconfigured, "the join API's admission check is misconfigured: "+err.Error())
		return nil, false
	}
	return claims, true
}

// unverifiedSubject is the sub claim of a compact JWS, read without checking its signature ("" if
// unreadable: Verify then refuses the token).
func unverifiedSubject(token string) string {
	jws, err := jose.ParseSignedCompact(token, []jose.SignatureAlgorithm{admission.Algorithm})
	if err != nil {
		return ""
	}
	var claims struct {
		Sub string `json:"sub"`
	}
	if json.Unmarshal(jws.UnsafePayloadWithoutVerification(), &claims) != nil {
		return ""
	}
	return claims.Sub
}

func (c *Checker) infof(format string, args ...any) {
	if c != nil && c.log != nil {
		c.log.Infof(format, args...)
	}
}

func (c *Checker) warnf(format string, args ...any) {
	if c != nil && c.log != nil {
		c.log.Warnf(format, args...)
	}
}

// refuse answers "code: detail" as text (what k0s's join client shows), or RFC 9457 JSON to a
// client that asks for application/problem+json; a 503 carries Retry-After.
func refuse(w http.ResponseWriter, r *http.Request, status int, code, detail string) {
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "2")
	}
	if wantsProblem(r.Header.Get("Accept")) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"type": "about:blank", "title": http.StatusText(status), "status": status, "code": code, "detail": detail})
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, code+": "+detail+"\n")
}

func wantsProblem(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		if media, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && media == "application/problem+json" {
			return true
		}
	}
	return false
}

// SetHeader puts this node's admission (JOIN_BROKER_ADMISSION) into a request's header, if the
// environment has one.
func SetHeader(h http.Header) {
	if token := Admission(); token != "" {
		h.Set(Header, token)
	}
}

// Admission is this node's admission token from its environment (JOIN_BROKER_ADMISSION), or "".
func Admission() string {
	return strings.TrimSpace(os.Getenv(EnvAdmission))
}

// Detail is ": " and the first line of a refused response's text body (at most 512 bytes), or ""
// when it has none: for a join client's error message.
func Detail(res *http.Response) string {
	if res == nil || res.Body == nil {
		return ""
	}
	body, _ := io.ReadAll(io.LimitReader(res.Body, 512))
	line, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
	if line = strings.TrimSpace(line); line == "" {
		return ""
	}
	return ": " + line
}
