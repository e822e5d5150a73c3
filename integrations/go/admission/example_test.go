package admission_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/etcd-join-broker/etcd-join-broker/integrations/go/admission"
)

// A join API checks the bearer token of a request to add node ctrl-2 at its peer URL, before it
// touches etcd.
func ExampleVerify() {
	handle := func(w http.ResponseWriter, r *http.Request, token string) {
		claims, err := admission.Verify(r.Context(), token, admission.Options{
			Broker:  "https://join.example.com",
			Cluster: "prod-eu",
			Node:    "ctrl-2",
			PeerURL: "https://10.0.0.2:2380",
		})
		var refusal *admission.Error
		if errors.As(err, &refusal) {
			if refusal.Status() == http.StatusServiceUnavailable {
				w.Header().Set("Retry-After", "2")
			}
			http.Error(w, refusal.Error(), refusal.Status()) // 401, 403, 410 or 503
			return
		} else if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError) // a bad Options value: a bug
			return
		}
		// claims.ID (the jti) identifies the admission: remember which admission added which member.
		fmt.Fprintf(w, "admitted %s for %s until %s\n", claims.ID, claims.Subject, claims.Expiry.Format(time.RFC3339))
	}
	_ = handle
}

// Through a broker outage, accept tokens that are not on a revocation list at most 30 s old.
func ExampleVerify_revocationListFallback() {
	trust, _ := admission.NewTrust(admission.TrustOptions{Broker: "https://join.example.com", Cluster: "prod-eu"})
	_, err := admission.Verify(context.Background(), "eyJ…", admission.Options{
		Broker:                 "https://join.example.com",
		Cluster:                "prod-eu",
		Node:                   "ctrl-2",
		PeerURL:                "https://10.0.0.2:2380",
		Trust:                  trust,
		RevocationListFallback: 30 * time.Second,
	})
	fmt.Println(errors.Is(err, admission.ErrInvalidToken))
	// Output: true
}
