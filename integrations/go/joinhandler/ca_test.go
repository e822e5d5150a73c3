package joinhandler_test

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcd-join-broker/etcd-join-broker/integrations/go/admission"
	"github.com/etcd-join-broker/etcd-join-broker/integrations/go/joinhandler"
)

// A CA made in Go, its key written as `format`, in a directory as ca.crt and ca.key.
func goCA(t *testing.T, key crypto.Signer, format string, edit func(*x509.Certificate)) string {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{Country: []string{"DE"}, Organization: []string{"Acme etcd"}, CommonName: "etcd-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	if edit != nil {
		edit(tmpl)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	var keyDER []byte
	label := "PRIVATE KEY"
	switch format {
	case "pkcs1":
		keyDER, label = x509.MarshalPKCS1PrivateKey(key.(*rsa.PrivateKey)), "RSA PRIVATE KEY"
	case "sec1":
		keyDER, err = x509.MarshalECPrivateKey(key.(*ecdsa.PrivateKey))
		label = "EC PRIVATE KEY"
	default:
		keyDER, err = x509.MarshalPKCS8PrivateKey(key)
	}
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "ca.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(filepath.Join(dir, "ca.key"), pem.EncodeToMemory(&pem.Block{Type: label, Bytes: keyDER}), 0o600)
	return dir
}

func rsaKey(t *testing.T, bits int) crypto.Signer {
	k, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func ecKey(curve elliptic.Curve) crypto.Signer {
	k, _ := ecdsa.GenerateKey(curve, rand.Reader)
	return k
}

func edKey() crypto.Signer {
	_, k, _ := ed25519.GenerateKey(rand.Reader)
	return k
}

// The peer and server certificates the signer issues for an admission, judged as etcd judges
// them: chained to the CA alone, for TLS servers and clients, issuer and key identifier as stored.
func issueAndJudge(t *testing.T, signer *joinhandler.CASigner, want x509.SignatureAlgorithm) {
	t.Helper()
	claims := &admission.Claims{Subject: "ctrl-1", PeerURL: "https://10.0.0.4:2380"}
	checked, err := signer.Check(claims, joinhandler.CertificateRequests{Peer: csr(t, "ctrl-1", "10.0.0.4"), Server: csr(t, "ctrl-1", "10.0.0.4", "127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	certs, err := signer.Issue(checked)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(signer.CA)
	for _, text := range []string{certs.Peer, certs.Server} {
		block, _ := pem.Decode([]byte(text))
		leaf, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
				t.Fatalf("usage %v: %v", usage, err)
			}
		}
		if !bytes.Equal(leaf.RawIssuer, signer.CA.RawSubject) || !bytes.Equal(leaf.AuthorityKeyId, signer.CA.SubjectKeyId) {
			t.Fatalf("issuer %x (CA subject %x), AKI %x (CA SKI %x)", leaf.RawIssuer, signer.CA.RawSubject, leaf.AuthorityKeyId, signer.CA.SubjectKeyId)
		}
		if leaf.SignatureAlgorithm != want {
			t.Fatalf("signed with %s, want %s", leaf.SignatureAlgorithm, want)
		}
	}
}

func TestLoadsTheCAsOperatorsHave(t *testing.T) {
	// Made by openssl (testdata/README.md): UTF8String subjects, SEC1, PKCS#1 and PKCS#8 keys.
	for dir, want := range map[string]x509.SignatureAlgorithm{
		"openssl-p256-sec1":     x509.ECDSAWithSHA256,
		"openssl-rsa2048-pkcs1": x509.SHA256WithRSA,
		"openssl-p384-pkcs8":    x509.ECDSAWithSHA384,
		"openssl-ed25519":       x509.PureEd25519,
	} {
		t.Run(dir, func(t *testing.T) {
			signer, err := joinhandler.LoadCA(filepath.Join("testdata", dir))
			if err != nil {
				t.Fatal(err)
			}
			issueAndJudge(t, signer, want)
		})
	}
	// Made by Go, as kubeadm and cfssl (k0s) write them.
	for name, c := range map[string]struct {
		key    crypto.Signer
		format string
		want   x509.SignatureAlgorithm
	}{
		"rsa2048-pkcs1": {rsaKey(t, 2048), "pkcs1", x509.SHA256WithRSA},
		"rsa4096-pkcs8": {rsaKey(t, 4096), "pkcs8", x509.SHA256WithRSA},
		"p256-sec1":     {ecKey(elliptic.P256()), "sec1", x509.ECDSAWithSHA256},
		"p384-sec1":     {ecKey(elliptic.P384()), "sec1", x509.ECDSAWithSHA384},
		"ed25519-pkcs8": {edKey(), "pkcs8", x509.PureEd25519},
	} {
		t.Run("go-"+name, func(t *testing.T) {
			signer, err := joinhandler.LoadCA(goCA(t, c.key, c.format, nil))
			if err != nil {
				t.Fatal(err)
			}
			issueAndJudge(t, signer, c.want)
		})
	}
}

func TestRefusesCAsThatCannotSign(t *testing.T) {
	p256 := ecKey(elliptic.P256())
	otherDir := goCA(t, ecKey(elliptic.P256()), "sec1", nil)
	mismatched := goCA(t, p256, "sec1", nil)
	otherKey, _ := os.ReadFile(filepath.Join(otherDir, "ca.key"))
	os.WriteFile(filepath.Join(mismatched, "ca.key"), otherKey, 0o600)
	junk := goCA(t, p256, "sec1", nil)
	os.WriteFile(filepath.Join(junk, "ca.key"), []byte("-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n"), 0o600)
	for _, c := range []struct {
		name, dir, code, words string
	}{
		{"junk key", junk, "ca_unreadable", "ca.key is not a PEM private key"},
		{"another key", mismatched, "ca_key_mismatch", "ca.key is not the key of " + filepath.Join(mismatched, "ca.crt") + " (CN=etcd-ca,O=Acme etcd,C=DE)"},
		{"RSA 1024", goCA(t, rsaKey(t, 1024), "pkcs1", nil), "ca_key_unsupported", "holds an RSA 1024 key; an etcd CA key here is RSA 2048–4096 bits"},
		{"P-521", goCA(t, ecKey(elliptic.P521()), "sec1", nil), "ca_key_unsupported", "holds an ECDSA key on curve P-521"},
		{"not a CA", goCA(t, p256, "sec1", func(c *x509.Certificate) { c.IsCA = false; c.KeyUsage = x509.KeyUsageDigitalSignature }), "ca_not_a_ca", "is not a CA certificate"},
		{"no certSign", goCA(t, p256, "sec1", func(c *x509.Certificate) { c.KeyUsage = x509.KeyUsageDigitalSignature }), "ca_cannot_sign", "its key usage lacks certSign"},
		{"server only", goCA(t, p256, "sec1", func(c *x509.Certificate) { c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth} }), "ca_cannot_sign", "needs serverAuth and clientAuth"},
		{"expired", goCA(t, p256, "sec1", func(c *x509.Certificate) {
			c.NotBefore, c.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour)
		}), "ca_not_valid_now", "expired on"},
	} {
		_, err := joinhandler.LoadCA(c.dir)
		var caErr *joinhandler.CAError
		if !errors.As(err, &caErr) || caErr.Code != c.code || !strings.Contains(err.Error(), c.words) {
			t.Errorf("%s: got %v, want %s containing %q", c.name, err, c.code, c.words)
		}
	}
}
