package joinhandler

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/etcd-join-broker/etcd-join-broker/integrations/go/admission"
)

// CertificateRequests are a joining node's PEM PKCS#10 requests, one per certificate; its keys
// stay on the node.
type CertificateRequests struct {
	Peer   string `json:"peer"`
	Server string `json:"server"`
}

// Certificates are what the join API signed for them, with the CA certificate. Never a key.
type Certificates struct {
	CA     string `json:"ca"`
	Peer   string `json:"peer"`
	Server string `json:"server"`
}

// CSRError is a refusal of certificate requests: Code is "invalid_csr" (400) or
// "csr_name_not_allowed" (422).
type CSRError struct {
	Code string
	Err  error
}

func (e *CSRError) Error() string { return e.Code + ": " + e.Err.Error() }

// Status is the HTTP status of the refusal.
func (e *CSRError) Status() int {
	if e.Code == "invalid_csr" {
		return 400
	}
	return 422
}

// Signer issues a joining node's etcd certificates for exactly its admission. The handler calls
// Check after the token is verified and before etcd is touched, and Issue once the member is
// added: a node whose requests are refused is never added.
type Signer interface {
	Check(claims *admission.Claims, csrs CertificateRequests) (Checked, error)
	Issue(checked Checked) (Certificates, error)
}

// Checked are requests a Signer accepted: their keys and the names each certificate gets.
type Checked struct {
	Node                  string
	PeerHosts, ServerHost []string
	PeerKey, ServerKey    crypto.PublicKey
}

// CASigner signs with the cluster's etcd CA (ca.crt and ca.key, as the agent's --pki-dir holds
// them). The names come from the admission, not from the request: CN = the token's sub; the peer
// certificate names exactly the host of its peer_url; the server certificate what its request
// asks within that host and loopback.
type CASigner struct {
	CA    *x509.Certificate
	Key   crypto.Signer
	Valid time.Duration // default a year
	Now   func() time.Time
}

var loopback = []string{"127.0.0.1", "::1", "localhost"}

func (s *CASigner) Check(claims *admission.Claims, csrs CertificateRequests) (Checked, error) {
	u, err := url.Parse(claims.PeerURL)
	if err != nil {
		return Checked{}, err
	}
	host := u.Hostname()
	peerKey, _, err := checkRequest("peer", csrs.Peer, claims.Subject, []string{host})
	if err != nil {
		return Checked{}, err
	}
	serverKey, asked, err := checkRequest("server", csrs.Server, claims.Subject, append([]string{host}, loopback...))
	if err != nil {
		return Checked{}, err
	}
	if len(asked) == 0 {
		asked = []string{host}
	}
	return Checked{Node: claims.Subject, PeerHosts: []string{host}, ServerHost: asked, PeerKey: peerKey, ServerKey: serverKey}, nil
}

func (s *CASigner) Issue(c Checked) (Certificates, error) {
	peer, err := s.sign(c.Node, c.PeerHosts, c.PeerKey)
	if err != nil {
		return Certificates{}, err
	}
	server, err := s.sign(c.Node, c.ServerHost, c.ServerKey)
	if err != nil {
		return Certificates{}, err
	}
	return Certificates{CA: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.CA.Raw})), Peer: peer, Server: server}, nil
}

func (s *CASigner) sign(node string, hosts []string, key crypto.PublicKey) (string, error) {
	now := time.Now()
	if s.Now != nil {
		now = s.Now()
	}
	valid := s.Valid
	if valid == 0 {
		valid = 365 * 24 * time.Hour
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: node},
		NotBefore:    now.Add(-5 * time.Minute),
		NotAfter:     minTime(now.Add(valid), s.CA.NotAfter),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.CA, key, s.Key)
	if err != nil {
		return "", err
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), nil
}

// checkRequest parses a request, checks its signature (the sender holds the key) and that it
// names this node and only allowed hosts; it returns its key and the hosts it asked for.
func checkRequest(kind, pemText, node string, allowed []string) (crypto.PublicKey, []string, error) {
	block, _ := pem.Decode([]byte(pemText))
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, nil, &CSRError{"invalid_csr", fmt.Errorf("the %s certificate request is not a PEM PKCS#10 request", kind)}
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err == nil {
		err = csr.CheckSignature()
	}
	if err != nil {
		return nil, nil, &CSRError{"invalid_csr", fmt.Errorf("the %s certificate request is unusable: %w", kind, err)}
	}
	if _, ok := csr.PublicKey.(*ecdsa.PublicKey); !ok {
		return nil, nil, &CSRError{"invalid_csr", fmt.Errorf("the %s certificate request's key is not ECDSA", kind)}
	}
	if csr.Subject.CommonName != "" && csr.Subject.CommonName != node {
		return nil, nil, &CSRError{"csr_name_not_allowed", fmt.Errorf("the %s certificate request names %s; this admission is for node %s", kind, csr.Subject.CommonName, node)}
	}
	var asked []string
	for _, ip := range csr.IPAddresses {
		asked = append(asked, ip.String())
	}
	asked = append(asked, csr.DNSNames...)
	for _, h := range asked {
		if !slices.ContainsFunc(allowed, func(a string) bool { return strings.EqualFold(a, h) }) {
			return nil, nil, &CSRError{"csr_name_not_allowed", fmt.Errorf("the %s certificate request asks for %s; this admission allows only %s", kind, h, strings.Join(allowed, ", "))}
		}
	}
	if len(csr.URIs) > 0 || len(csr.EmailAddresses) > 0 {
		return nil, nil, &CSRError{"csr_name_not_allowed", errors.New("URIs and e-mail addresses are not allowed")}
	}
	return csr.PublicKey, asked, nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
