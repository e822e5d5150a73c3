package joinhandler

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
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
	// Client, optional: the node's API server's client certificate (etcd user kube-apiserver).
	Client string `json:"client,omitempty"`
}

// Certificates are what the join API signed for them, with the CA certificate. Never a key.
type Certificates struct {
	CA     string `json:"ca"`
	Peer   string `json:"peer"`
	Server string `json:"server"`
	Client string `json:"client,omitempty"`
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
// added and has not started: a node whose requests are refused is never added, and a member
// that has run gets no second set.
type Signer interface {
	Check(claims *admission.Claims, csrs CertificateRequests) (Checked, error)
	Issue(checked Checked) (Certificates, error)
}

// Checked are requests a Signer accepted: their keys, the names each certificate gets and the
// serial numbers they will carry (chosen before the add, so that a record written with the
// learner can name them).
type Checked struct {
	Node                  string
	PeerHosts, ServerHost []string
	PeerKey, ServerKey    crypto.PublicKey
	PeerSerial            *big.Int
	ServerSerial          *big.Int
	// ClientKey is set when the requests had Client.
	ClientKey          crypto.PublicKey
	ClientSerial       *big.Int
	IssuedAt, NotAfter time.Time
}

// APIServerUser is the etcd user (and common name) of the API servers' client certificates.
const APIServerUser = "kube-apiserver"

// MaxRequestedNames bounds the subject alternative names a request may carry.
const MaxRequestedNames = 16

// AcceptedKeys says in words which keys a request may bring.
const AcceptedKeys = "ECDSA P-256 or P-384, or RSA of 2048 to 8192 bits"

// ReservedNodeNames are refused without case, as by the broker (src/shared/protocol/identifiers.ts):
// etcd takes a certificate's common name as the user, and root is its superuser.
var ReservedNodeNames = []string{"root", "guest", "kube-apiserver", "kube-apiserver-etcd-client", "apiserver-etcd-client", "join-broker"}

// ReservedNodeName says whether no certificate may name this node.
func ReservedNodeName(node string) bool {
	return slices.Contains(ReservedNodeNames, strings.ToLower(node))
}

// CASigner signs with the cluster's etcd CA (ca.crt and ca.key, as the agent's --pki-dir holds
// them). The names come from the admission, not from the request: CN = the token's sub; the peer
// certificate names exactly the host of its peer_url; the server certificate what its request
// asks within that host and loopback. The checks and the certificates are the TypeScript
// signer's (src/node/pki/x509.ts), held to the same vectors (integrations/vectors/signer-vectors.json).
type CASigner struct {
	CA    *x509.Certificate
	Key   crypto.Signer
	Valid time.Duration // default a year
	Now   func() time.Time
}

var loopback = []string{"127.0.0.1", "::1", "localhost"}

// AllowedHosts are the names an admission with this peer URL allows on each certificate.
func AllowedHosts(peerURL string) (peer, server []string, err error) {
	u, err := url.Parse(peerURL)
	if err != nil {
		return nil, nil, err
	}
	host := u.Hostname()
	server = []string{host}
	for _, l := range loopback {
		if l != host {
			server = append(server, l)
		}
	}
	return []string{host}, server, nil
}

func (s *CASigner) Check(claims *admission.Claims, csrs CertificateRequests) (Checked, error) {
	if ReservedNodeName(claims.Subject) {
		return Checked{}, &CSRError{"csr_name_not_allowed", fmt.Errorf("node name %q is reserved (%s, without case); no certificate is signed for it", claims.Subject, strings.Join(ReservedNodeNames, ", "))}
	}
	peerHosts, serverHosts, err := AllowedHosts(claims.PeerURL)
	if err != nil {
		return Checked{}, err
	}
	peer, err := CheckRequest("peer", csrs.Peer, claims.Subject, peerHosts)
	if err != nil {
		return Checked{}, err
	}
	server, err := CheckRequest("server", csrs.Server, claims.Subject, serverHosts)
	if err != nil {
		return Checked{}, err
	}
	spkis := [][]byte{peer.SPKI, server.SPKI}
	var client CheckedRequest
	if csrs.Client != "" {
		if client, err = CheckRequest("client", csrs.Client, APIServerUser, nil); err != nil {
			return Checked{}, err
		}
		spkis = append(spkis, client.SPKI)
	}
	for i := range spkis {
		for j := i + 1; j < len(spkis); j++ {
			if bytes.Equal(spkis[i], spkis[j]) {
				return Checked{}, &CSRError{"invalid_csr", errors.New("two of the certificate requests bring the same key: each certificate has a key of its own")}
			}
		}
	}
	asked := server.Hosts
	if len(asked) == 0 {
		asked = peerHosts
	}
	now := s.now()
	c := Checked{Node: claims.Subject, PeerHosts: peerHosts, ServerHost: asked, PeerKey: peer.Key, ServerKey: server.Key, IssuedAt: now, NotAfter: minTime(now.Add(s.valid()), s.CA.NotAfter)}
	if c.PeerSerial, err = NewSerial(); err != nil {
		return Checked{}, err
	}
	if c.ServerSerial, err = NewSerial(); err != nil {
		return Checked{}, err
	}
	if client.Key != nil {
		c.ClientKey = client.Key
		if c.ClientSerial, err = NewSerial(); err != nil {
			return Checked{}, err
		}
	}
	return c, nil
}

func (s *CASigner) Issue(c Checked) (Certificates, error) {
	if c.PeerSerial == nil || c.ServerSerial == nil {
		return Certificates{}, errors.New("these requests were not checked by Check")
	}
	peer, err := s.sign(KindPeer, c.Node, c.PeerHosts, c.PeerKey, c.PeerSerial, c.IssuedAt, c.NotAfter)
	if err != nil {
		return Certificates{}, err
	}
	server, err := s.sign(KindServer, c.Node, c.ServerHost, c.ServerKey, c.ServerSerial, c.IssuedAt, c.NotAfter)
	if err != nil {
		return Certificates{}, err
	}
	certs := Certificates{CA: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.CA.Raw})), Peer: peer, Server: server}
	if c.ClientKey != nil {
		if certs.Client, err = s.sign(KindClient, c.Node, nil, c.ClientKey, c.ClientSerial, c.IssuedAt, c.NotAfter); err != nil {
			return Certificates{}, err
		}
	}
	return certs, nil
}

func (s *CASigner) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *CASigner) valid() time.Duration {
	if s.Valid == 0 {
		return 365 * 24 * time.Hour
	}
	return s.Valid
}

// Kind is which of a node's certificates is made.
type Kind string

const (
	// KindPeer is etcd's peer port at both ends, and the node's own client identity.
	KindPeer Kind = "peer"
	// KindServer is etcd's client port, and the client etcd's own JSON gateway presents to the
	// gRPC server behind it (so it needs clientAuth too).
	KindServer Kind = "server"
	// KindClient is the node's API server's client certificate: CN = kube-apiserver, OU = the node.
	KindClient Kind = "client"
)

// KindUsages are the extended key usages of each kind.
var KindUsages = map[Kind][]x509.ExtKeyUsage{
	KindPeer:   {x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	KindServer: {x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	KindClient: {x509.ExtKeyUsageClientAuth},
}

// NewSerial is a fresh serial number: 16 random bytes, positive, without a leading zero byte.
func NewSerial() (*big.Int, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	b[0] = (b[0] & 0x7f) | 0x01
	return new(big.Int).SetBytes(b), nil
}

// SerialHex is a serial as the TypeScript signer and the revocation records write it.
func SerialHex(serial *big.Int) string { return hex.EncodeToString(serial.Bytes()) }

func (s *CASigner) sign(kind Kind, node string, hosts []string, key crypto.PublicKey, serial *big.Int, issuedAt, notAfter time.Time) (string, error) {
	usage := x509.KeyUsageDigitalSignature
	if _, ok := key.(*rsa.PublicKey); ok {
		usage |= x509.KeyUsageKeyEncipherment
	}
	ski, err := subjectKeyID(key)
	if err != nil {
		return "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               subjectOf(kind, node),
		NotBefore:             issuedAt.Add(-5 * time.Minute),
		NotAfter:              notAfter,
		BasicConstraintsValid: true,
		IsCA:                  false,
		KeyUsage:              usage,
		ExtKeyUsage:           KindUsages[kind],
		SubjectKeyId:          ski,
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

// subjectOf names the node as a node certificate's CN; the API server's client certificate names
// its etcd user, with the node as OU.
func subjectOf(kind Kind, node string) pkix.Name {
	if kind == KindClient {
		return pkix.Name{CommonName: APIServerUser, OrganizationalUnit: []string{node}}
	}
	return pkix.Name{CommonName: node}
}

// subjectKeyID is RFC 5280's method 1, as the TypeScript signer makes it: the SHA-1 of the
// subjectPublicKey bit string.
func subjectKeyID(key crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		return nil, err
	}
	var spki struct {
		Algorithm pkix.AlgorithmIdentifier
		PublicKey asn1.BitString
	}
	if _, err := asn1.Unmarshal(der, &spki); err != nil {
		return nil, err
	}
	sum := sha1.Sum(spki.PublicKey.Bytes)
	return sum[:], nil
}

// CheckedRequest is one request that passed CheckRequest.
type CheckedRequest struct {
	Key crypto.PublicKey
	// SPKI is the request's SubjectPublicKeyInfo, to tell one key from another.
	SPKI []byte
	// Hosts are what it asked for, canonical (lower case; IPv6 as RFC 5952 writes it), each once.
	Hosts []string
}

var acceptedSignatures = []x509.SignatureAlgorithm{
	x509.ECDSAWithSHA256, x509.ECDSAWithSHA384, x509.ECDSAWithSHA512,
	x509.SHA256WithRSA, x509.SHA384WithRSA, x509.SHA512WithRSA,
}

var oidSubjectAltName = asn1.ObjectIdentifier{2, 5, 29, 17}
var oidCommonName = asn1.ObjectIdentifier{2, 5, 4, 3}

// CheckRequest parses one request and checks it, in the TypeScript signer's order: a PEM PKCS#10
// request, signed (ECDSA or RSA PKCS#1 v1.5) over SHA-256/384/512, with a key of AcceptedKeys, whose signature holds (the
// sender holds the key); at most MaxRequestedNames subject alternative names; every common name
// `node`; every name a DNS name or an IP address among `allowed` (an IPv4-mapped IPv6 address
// never is). It returns its key and the hosts it asked for.
func CheckRequest(kind, pemText, node string, allowed []string) (CheckedRequest, error) {
	bad := func(format string, args ...any) error {
		return &CSRError{"invalid_csr", fmt.Errorf("the %s certificate request "+format, append([]any{kind}, args...)...)}
	}
	block, _ := pem.Decode([]byte(pemText))
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return CheckedRequest{}, bad("is not a PEM PKCS#10 request")
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return CheckedRequest{}, bad("is not a PEM PKCS#10 request: %v", err)
	}
	names, err := requestedNames(csr)
	if err != nil {
		return CheckedRequest{}, bad("is not a PEM PKCS#10 request: %v", err)
	}
	if !slices.Contains(acceptedSignatures, csr.SignatureAlgorithm) {
		return CheckedRequest{}, bad("is signed with %v: only ECDSA or RSA PKCS#1 v1.5 signatures over SHA-256, SHA-384 or SHA-512 are accepted", csr.SignatureAlgorithm)
	}
	if what := keyProblem(csr.PublicKey); what != "" {
		return CheckedRequest{}, bad("has %s; accepted are %s", what, AcceptedKeys)
	}
	if err := csr.CheckSignature(); err != nil {
		return CheckedRequest{}, bad("is unusable: %v", err)
	}
	if len(names) > MaxRequestedNames {
		return CheckedRequest{}, bad("names %d subject alternative names; at most %d are read", len(names), MaxRequestedNames)
	}
	// Every CN: pkix.Name.CommonName keeps only the last one.
	var cns []string
	for _, a := range csr.Subject.Names {
		if a.Type.Equal(oidCommonName) {
			cns = append(cns, fmt.Sprint(a.Value))
		}
	}
	for _, cn := range cns {
		if cn != node {
			return CheckedRequest{}, &CSRError{"csr_name_not_allowed", fmt.Errorf("the %s certificate request names %s; this admission is for node %s", kind, strings.Join(cns, ", "), node)}
		}
	}
	var hosts []string
	for _, n := range names {
		host, ok := allowedName(n, allowed)
		if !ok {
			what := n.text
			if n.mapped {
				what += " (an IPv4-mapped IPv6 address)"
			}
			allows := "only " + strings.Join(allowed, ", ")
			if len(allowed) == 0 {
				allows = "no subject alternative name in it"
			}
			return CheckedRequest{}, &CSRError{"csr_name_not_allowed", fmt.Errorf("the %s certificate request asks for %s; this admission allows %s", kind, what, allows)}
		}
		if !slices.Contains(hosts, host) {
			hosts = append(hosts, host)
		}
	}
	return CheckedRequest{Key: csr.PublicKey, SPKI: csr.RawSubjectPublicKeyInfo, Hosts: hosts}, nil
}

func keyProblem(key any) string {
	switch k := key.(type) {
	case *ecdsa.PublicKey:
		if k.Curve == elliptic.P256() || k.Curve == elliptic.P384() {
			return ""
		}
		return "an ECDSA key on curve " + k.Curve.Params().Name
	case *rsa.PublicKey:
		if bits := k.N.BitLen(); bits < 2048 || bits > 8192 {
			return fmt.Sprintf("an RSA key of %d bits", bits)
		}
		return ""
	case nil:
		// Go's parser leaves a key it does not know (P-224 and other curves, RSA-PSS keys) nil.
		return "a key of a type or curve that is not accepted"
	default:
		return fmt.Sprintf("a %T key", key)
	}
}

// requestedName is one subject alternative name as asked: type, its text, and for an address
// whether it is IPv4 written as IPv6.
type requestedName struct {
	dns, ip bool
	text    string
	mapped  bool
}

// requestedNames reads the request's subject alternative names itself: Go's parser drops the
// types it does not know (other names, directory names), which must be refused, not ignored.
func requestedNames(csr *x509.CertificateRequest) ([]requestedName, error) {
	var out []requestedName
	for _, ext := range csr.Extensions {
		if !ext.Id.Equal(oidSubjectAltName) {
			continue
		}
		var seq asn1.RawValue
		if rest, err := asn1.Unmarshal(ext.Value, &seq); err != nil || len(rest) > 0 || seq.Tag != asn1.TagSequence {
			return nil, errors.New("its subject alternative names cannot be read")
		}
		for rest := seq.Bytes; len(rest) > 0; {
			var v asn1.RawValue
			var err error
			if rest, err = asn1.Unmarshal(rest, &v); err != nil {
				return nil, errors.New("its subject alternative names cannot be read")
			}
			switch {
			case v.Class == asn1.ClassContextSpecific && v.Tag == 2:
				out = append(out, requestedName{dns: true, text: string(v.Bytes)})
			case v.Class == asn1.ClassContextSpecific && v.Tag == 7 && (len(v.Bytes) == 4 || len(v.Bytes) == 16):
				ip := net.IP(v.Bytes)
				n := requestedName{ip: true, text: ip.String()}
				if len(v.Bytes) == 16 && ip.To4() != nil {
					n.mapped = true
					n.text = "::ffff:" + ip.String()
				}
				out = append(out, n)
			case v.Class == asn1.ClassContextSpecific && v.Tag == 1:
				out = append(out, requestedName{text: "email " + string(v.Bytes)})
			case v.Class == asn1.ClassContextSpecific && v.Tag == 6:
				out = append(out, requestedName{text: "url " + string(v.Bytes)})
			default:
				out = append(out, requestedName{text: fmt.Sprintf("a name of type %d", v.Tag)})
			}
		}
	}
	return out, nil
}

// allowedName is the allowed host this name is (canonical): a DNS name matches only DNS names,
// an address only addresses, and an IPv4-mapped IPv6 address nothing.
func allowedName(n requestedName, allowed []string) (string, bool) {
	switch {
	case n.dns:
		host := strings.ToLower(n.text)
		return host, slices.ContainsFunc(allowed, func(a string) bool { return net.ParseIP(a) == nil && strings.EqualFold(a, host) })
	case n.ip && !n.mapped:
		return n.text, slices.ContainsFunc(allowed, func(a string) bool { ip := net.ParseIP(a); return ip != nil && ip.String() == n.text })
	}
	return "", false
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
