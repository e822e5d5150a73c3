package joinhandler_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/etcd-join-broker/etcd-join-broker/integrations/go/admission"
	"github.com/etcd-join-broker/etcd-join-broker/integrations/go/joinhandler"
)

// The shared signer vectors (integrations/vectors/signer-vectors.json, requests made by openssl
// with scripts/signer-vectors.mjs); the TypeScript signer is held to the same file
// (src/node/join-api/signer-vectors.test.ts).
type signerRequests struct {
	Peer   string `json:"peer"`
	Server string `json:"server"`
}

type signerVectors struct {
	Admission struct {
		Node    string `json:"node"`
		PeerURL string `json:"peerURL"`
	} `json:"admission"`
	Good  signerRequests `json:"good"`
	Cases []struct {
		Name    string          `json:"name"`
		Kind    string          `json:"kind"`
		Node    string          `json:"node"`
		PeerURL string          `json:"peerURL"`
		CSR     string          `json:"csr"`
		Good    *signerRequests `json:"good"`
		Expect  struct {
			OK     bool     `json:"ok"`
			Hosts  []string `json:"hosts"`
			Status int      `json:"status"`
			Code   string   `json:"code"`
		} `json:"expect"`
	} `json:"cases"`
}

func vectorCA(t *testing.T) *joinhandler.CASigner {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "signer vectors CA"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(30 * 24 * time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	return &joinhandler.CASigner{CA: ca, Key: key}
}

func TestSharedSignerVectors(t *testing.T) {
	raw, err := os.ReadFile("../../vectors/signer-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v signerVectors
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Cases) < 40 {
		t.Fatalf("only %d cases", len(v.Cases))
	}
	signer := vectorCA(t)
	for _, c := range v.Cases {
		t.Run(c.Name, func(t *testing.T) {
			node, peerURL, good := v.Admission.Node, v.Admission.PeerURL, v.Good
			if c.Node != "" {
				node = c.Node
			}
			if c.PeerURL != "" {
				peerURL = c.PeerURL
			}
			if c.Good != nil {
				good = *c.Good
			}
			csrs := joinhandler.CertificateRequests{Peer: good.Peer, Server: good.Server}
			switch c.Kind {
			case "peer":
				csrs.Peer = c.CSR
			case "server":
				csrs.Server = c.CSR
			default:
				csrs.Client = c.CSR
			}
			checked, err := signer.Check(&admission.Claims{Subject: node, PeerURL: peerURL}, csrs)
			if !c.Expect.OK {
				var refusal *joinhandler.CSRError
				if !errors.As(err, &refusal) {
					t.Fatalf("expected %d %s, got %v", c.Expect.Status, c.Expect.Code, err)
				}
				if refusal.Code != c.Expect.Code || refusal.Status() != c.Expect.Status {
					t.Fatalf("expected %d %s, got %d %s (%v)", c.Expect.Status, c.Expect.Code, refusal.Status(), refusal.Code, refusal)
				}
				return
			}
			if err != nil {
				t.Fatalf("expected it signed, got %v", err)
			}
			issued, err := signer.Issue(checked)
			if err != nil {
				t.Fatal(err)
			}
			text, serial := issued.Peer, checked.PeerSerial
			switch c.Kind {
			case "server":
				text, serial = issued.Server, checked.ServerSerial
			case "client":
				text, serial = issued.Client, checked.ClientSerial
			}
			block, _ := pem.Decode([]byte(text))
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			var hosts []string
			// The order the certificate carries them in: this signer writes each host as IP or DNS in turn.
			for _, e := range cert.Extensions {
				if e.Id.Equal([]int{2, 5, 29, 17}) {
					hosts = sanOrder(t, e.Value)
				}
			}
			if !slices.Equal(hosts, c.Expect.Hosts) {
				t.Errorf("names %v, want %v", hosts, c.Expect.Hosts)
			}
			wantCN, wantEKU := node, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
			if c.Kind == "client" {
				wantCN, wantEKU = joinhandler.APIServerUser, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
				if !slices.Equal(cert.Subject.OrganizationalUnit, []string{node}) {
					t.Errorf("OU %v, want %s", cert.Subject.OrganizationalUnit, node)
				}
			}
			if cert.Subject.CommonName != wantCN || cert.SerialNumber.Cmp(serial) != 0 || cert.IsCA || !cert.BasicConstraintsValid {
				t.Errorf("CN %q serial %v CA %v", cert.Subject.CommonName, cert.SerialNumber, cert.IsCA)
			}
			if !slices.Equal(cert.ExtKeyUsage, wantEKU) {
				t.Errorf("extended key usage %v, want %v", cert.ExtKeyUsage, wantEKU)
			}
			wantKU := x509.KeyUsageDigitalSignature
			if _, isRSA := cert.PublicKey.(*rsa.PublicKey); isRSA {
				wantKU |= x509.KeyUsageKeyEncipherment
			}
			if cert.KeyUsage != wantKU || len(cert.SubjectKeyId) == 0 {
				t.Errorf("key usage %v (want %v), subject key id %x", cert.KeyUsage, wantKU, cert.SubjectKeyId)
			}
			if _, err := cert.Verify(x509.VerifyOptions{Roots: certPool(signer.CA), KeyUsages: wantEKU}); err != nil {
				t.Errorf("does not verify as %s: %v", c.Kind, err)
			}
		})
	}
}

func certPool(ca *x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca)
	return p
}

// sanOrder lists a certificate's DNS names and addresses in the order it carries them.
func sanOrder(t *testing.T, value []byte) []string {
	t.Helper()
	var seq asn1.RawValue
	if _, err := asn1.Unmarshal(value, &seq); err != nil {
		t.Fatal(err)
	}
	var out []string
	for rest := seq.Bytes; len(rest) > 0; {
		var v asn1.RawValue
		var err error
		if rest, err = asn1.Unmarshal(rest, &v); err != nil {
			t.Fatal(err)
		}
		switch v.Tag {
		case 2:
			out = append(out, string(v.Bytes))
		case 7:
			out = append(out, net.IP(v.Bytes).String())
		default:
			t.Fatalf("a name of type %d", v.Tag)
		}
	}
	return out
}
