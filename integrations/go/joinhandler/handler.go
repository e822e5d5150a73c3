// Package joinhandler is a k0s-style controllers' join API endpoint, POST /v1beta1/etcd/members,
// that requires the broker's admission token before it adds a node's etcd member.
//
// It shows where the check goes in a handler like k0s's (cmd/api): after reading the request and
// before the etcd call; the refusals become problem+json answers with the verifier's codes, and
// the not-now ones 503 with Retry-After instead of 500. The etcd side is the Members interface,
// which a real join API implements with go.etcd.io/etcd/client/v3 (MemberAddAsLearner, and on
// "Peer URLs already exists" the existing member). With etcd on TLS, a Signer (CASigner, LoadCA) signs
// the node's certificate requests for exactly its admission: checked before the add, issued after.
package joinhandler

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/etcd-join-broker/etcd-join-broker/integrations/go/admission"
)

// Request is the body of POST /v1beta1/etcd/members.
type Request struct {
	Node        string `json:"node"`
	PeerAddress string `json:"peerAddress"`
	// CSRs, with etcd on TLS: the node's certificate requests, signed by Handler.Signer.
	CSRs *CertificateRequests `json:"csrs,omitempty"`
}

// Response is the 200 answer.
type Response struct {
	MemberID       string   `json:"memberID"`
	Learner        bool     `json:"learner"`
	InitialCluster []string `json:"initialCluster"`
	// Started says the member has run already (it published its name): a node whose data dir
	// is empty must then not start etcd as that member, whose raft state (term, vote) is lost.
	Started bool `json:"started"`
	// Certificates answer the request's CSRs.
	Certificates *Certificates `json:"certificates,omitempty"`
}

// Member is what Members.AddLearner reports.
type Member struct {
	ID             uint64
	Learner        bool
	InitialCluster []string
	// Started: the member existed already and has started (etcd lists its name).
	Started bool
}

// Members adds etcd members. AddLearner must be idempotent for a peer URL: if a member with it
// exists, return that member.
type Members interface {
	AddLearner(ctx context.Context, node, peerURL string) (Member, error)
}

// NotNow is an error from Members that the node should retry after a while (etcd's "unhealthy
// cluster", "too many learner members", no endpoint answering).
type NotNow struct {
	Code       string
	RetryAfter time.Duration
	Err        error
}

func (e *NotNow) Error() string { return e.Code + ": " + e.Err.Error() }
func (e *NotNow) Unwrap() error { return e.Err }

// Handler serves POST /v1beta1/etcd/members.
type Handler struct {
	// Verify holds the broker and cluster (Node and PeerURL are filled from the request), and
	// optionally a Trust, a clock, the revocation list fallback.
	Verify  admission.Options
	Members Members
	// Signer, if set, signs the certificate requests a node sends with its add (etcd on TLS);
	// without it such an add is refused (422 certificates_unavailable).
	Signer Signer
	// Log, if set, is told about each refusal and addition.
	Log func(format string, args ...any)
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		problem(w, http.StatusMethodNotAllowed, "method_not_allowed", "use POST", 0)
		return
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		problem(w, http.StatusUnauthorized, "unauthorized", "no bearer token", 0)
		return
	}
	var req Request
	dec := json.NewDecoder(io.LimitReader(r.Body, 16<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || req.Node == "" || req.PeerAddress == "" {
		problem(w, http.StatusBadRequest, "invalid_request", "the body must be {\"node\", \"peerAddress\"}", 0)
		return
	}
	if ReservedNodeName(req.Node) {
		problem(w, http.StatusBadRequest, "invalid_node", "node name "+strconv.Quote(req.Node)+" is reserved ("+strings.Join(ReservedNodeNames, ", ")+", without case)", 0)
		return
	}

	// The check: the token must admit this node at this peer URL, now.
	opts := h.Verify
	opts.Node, opts.PeerURL, opts.Role = req.Node, req.PeerAddress, admission.RoleJoin
	claims, err := admission.Verify(r.Context(), token, opts)
	var refusal *admission.Error
	if errors.As(err, &refusal) {
		h.log("refused %s at %s: %v", req.Node, req.PeerAddress, refusal)
		problem(w, refusal.Status(), string(refusal.Code), refusal.Message, 2*time.Second)
		return
	} else if err != nil {
		h.log("verifier misconfigured: %v", err)
		problem(w, http.StatusInternalServerError, "internal_error", "the verifier is misconfigured", 0)
		return
	}

	// With etcd on TLS: the requests are checked before etcd is touched, so that a node that
	// could not run its member is never added, and signed once it is.
	var checked *Checked
	if req.CSRs != nil {
		if h.Signer == nil {
			problem(w, 422, "certificates_unavailable", "this join API holds no etcd CA, so it cannot sign the certificate requests sent with this add", 0)
			return
		}
		c, err := h.Signer.Check(claims, *req.CSRs)
		var bad *CSRError
		if errors.As(err, &bad) {
			h.log("refused %s's certificate requests: %v", req.Node, bad)
			problem(w, bad.Status(), bad.Code, bad.Err.Error(), 0)
			return
		} else if err != nil {
			problem(w, http.StatusInternalServerError, "internal_error", err.Error(), 0)
			return
		}
		checked = &c
	}

	// Only now touch etcd: as a learner, which does not count toward quorum.
	member, err := h.Members.AddLearner(r.Context(), req.Node, req.PeerAddress)
	var notNow *NotNow
	if errors.As(err, &notNow) {
		problem(w, http.StatusServiceUnavailable, notNow.Code, notNow.Error(), notNow.RetryAfter)
		return
	} else if err != nil {
		problem(w, http.StatusServiceUnavailable, "etcd_error", err.Error(), 5*time.Second)
		return
	}
	h.log("added %s (%s) as member %d under admission %s", req.Node, req.PeerAddress, member.ID, claims.ID)
	res := Response{MemberID: strconv.FormatUint(member.ID, 10), Learner: member.Learner, InitialCluster: member.InitialCluster, Started: member.Started}
	// A second set for the same member only while it has not run (its node crashed before our
	// answer): a member that has started holds its certificates, and a voter never gets more.
	if checked != nil && (member.Started || !member.Learner) {
		problem(w, http.StatusConflict, "certificates_not_reissued", "member "+res.MemberID+" has started: its certificates were signed before it ran, and none are signed for a member that has", 0)
		return
	}
	if checked != nil {
		certs, err := h.Signer.Issue(*checked)
		if err != nil {
			problem(w, http.StatusInternalServerError, "internal_error", "signing failed: "+err.Error(), 0)
			return
		}
		res.Certificates = &certs
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(res)
}

func (h *Handler) log(format string, args ...any) {
	if h.Log != nil {
		h.Log(format, args...)
	}
}

// problem writes an RFC 9457 answer; a 503 always carries Retry-After.
func problem(w http.ResponseWriter, status int, code, detail string, retryAfter time.Duration) {
	if status == http.StatusServiceUnavailable {
		if retryAfter < time.Second {
			retryAfter = 2 * time.Second
		}
		w.Header().Set("Retry-After", strconv.Itoa(int(retryAfter.Seconds())))
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "about:blank", "title": http.StatusText(status), "status": status, "code": code, "detail": detail})
}
