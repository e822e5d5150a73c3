package joinhandler_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/etcd-join-broker/etcd-join-broker/integrations/go/internal/vectorstest"
	"github.com/etcd-join-broker/etcd-join-broker/integrations/go/joinhandler"
)

func testCA(t *testing.T) *joinhandler.CASigner {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test etcd CA"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	return &joinhandler.CASigner{CA: ca, Key: key}
}

func csr(t *testing.T, cn string, hosts ...string) string {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
}

func withCSRs(node, peer, peerCSR, serverCSR string) string {
	b, _ := json.Marshal(map[string]any{"node": node, "peerAddress": peer, "csrs": map[string]string{"peer": peerCSR, "server": serverCSR}})
	return string(b)
}

func signingServer(t *testing.T, signer joinhandler.Signer) (*vectorstest.Vectors, *recorder, *httptest.Server) {
	v, members, srv := setup(t, time.Minute)
	h := srv.Config.Handler.(*joinhandler.Handler)
	h.Signer = signer
	return v, members, srv
}

func TestSignsForTheAdmittedPeerHostOnly(t *testing.T) {
	ca := testCA(t)
	v, members, srv := signingServer(t, ca)
	token, node, peer := v.Token(t, "a join token, bound to its node and peer")
	host := strings.Split(strings.TrimPrefix(peer, "https://"), ":")[0]

	status, body, _ := post(t, srv, token, withCSRs(node, peer, csr(t, node, "10.9.9.9"), csr(t, node, host)))
	if status != 422 || body["code"] != "csr_name_not_allowed" || len(members.added) != 0 {
		t.Fatalf("another peer host: got %d %v, added %v", status, body, members.added)
	}
	status, body, _ = post(t, srv, token, withCSRs(node, peer, csr(t, "ctrl-9", host), csr(t, node, host)))
	if status != 422 || len(members.added) != 0 {
		t.Fatalf("another node: got %d %v", status, body)
	}
	status, body, _ = post(t, srv, token, withCSRs(node, peer, "junk", "junk"))
	if status != 400 || body["code"] != "invalid_csr" || len(members.added) != 0 {
		t.Fatalf("junk: got %d %v", status, body)
	}

	status, body, _ = post(t, srv, token, withCSRs(node, peer, csr(t, node, host), csr(t, node, host, "127.0.0.1")))
	if status != 200 || len(members.added) != 1 {
		t.Fatalf("got %d %v", status, body)
	}
	certs := body["certificates"].(map[string]any)
	block, _ := pem.Decode([]byte(certs["peer"].(string)))
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != node || len(cert.IPAddresses) != 1 || cert.IPAddresses[0].String() != host || cert.CheckSignatureFrom(ca.CA) != nil {
		t.Fatalf("peer certificate: CN %q, IPs %v", cert.Subject.CommonName, cert.IPAddresses)
	}
}

func TestRequestsWithoutASignerAreRefusedBeforeEtcd(t *testing.T) {
	v, members, srv := setup(t, time.Minute)
	token, node, peer := v.Token(t, "a join token, bound to its node and peer")
	status, body, _ := post(t, srv, token, withCSRs(node, peer, "x", "y"))
	if status != 422 || body["code"] != "certificates_unavailable" || len(members.added) != 0 {
		t.Fatalf("got %d %v, added %v", status, body, members.added)
	}
}

// A member that has started (or is a voter) gets no second set of certificates: 409, nothing signed.
func TestNoCertificatesForAStartedMember(t *testing.T) {
	ca := testCA(t)
	v, members, srv := signingServer(t, ca)
	token, node, peer := v.Token(t, "a join token, bound to its node and peer")
	host := strings.Split(strings.TrimPrefix(peer, "https://"), ":")[0]
	members.started = true
	status, body, _ := post(t, srv, token, withCSRs(node, peer, csr(t, node, host), csr(t, node, host)))
	if status != 409 || body["code"] != "certificates_not_reissued" || body["certificates"] != nil {
		t.Fatalf("got %d %v", status, body)
	}
}

// A reserved node name is refused before anything else (400 invalid_node).
func TestReservedNodeNames(t *testing.T) {
	v, members, srv := signingServer(t, testCA(t))
	token, _, peer := v.Token(t, "a join token, bound to its node and peer")
	for _, name := range []string{"root", "Root", "kube-apiserver"} {
		status, body, _ := post(t, srv, token, withCSRs(name, peer, "x", "y"))
		if status != 400 || body["code"] != "invalid_node" || len(members.added) != 0 {
			t.Fatalf("%s: got %d %v", name, status, body)
		}
	}
}
