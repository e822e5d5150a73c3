package main

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func certcheck(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String() + errOut.String()
}

func loadCA(t *testing.T, dir string) (*x509.Certificate, crypto.Signer) {
	t.Helper()
	c, err := readCertificate(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "ca.key"))
	block, _ := pem.Decode(data)
	var key any
	switch block.Type {
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}
	if err != nil {
		t.Fatal(err)
	}
	return c, key.(crypto.Signer)
}

type leafOptions struct {
	issuer         []byte // raw issuer instead of the CA's subject
	authorityKeyID []byte
	clientOnly     bool
}

func writeLeaf(t *testing.T, dir string, ca *x509.Certificate, caKey crypto.Signer, o leafOptions) string {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7),
		Subject:      pkix.Name{CommonName: "ctrl-1"},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	if o.clientOnly {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	parent := ca
	if o.issuer != nil {
		// A parent that spells the same name with other bytes: what re-encoding a subject does.
		copyOf := *ca
		copyOf.RawSubject = o.issuer
		parent = &copyOf
	}
	if o.authorityKeyID != nil {
		tmpl.AuthorityKeyId = o.authorityKeyID
		copyOf := *parent
		copyOf.SubjectKeyId = nil
		parent = &copyOf
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "leaf.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

func TestEveryKindOfCAMadeAndJudged(t *testing.T) {
	for _, kind := range []string{"rsa2048", "rsa4096", "p256", "p384", "ed25519"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			if code, out := certcheck(t, "make-ca", "--out", dir, "--key", kind, "--subject", "C=DE,O=Acme etcd,CN=etcd-ca"); code != 0 {
				t.Fatalf("make-ca: %d %s", code, out)
			}
			ca, key := loadCA(t, dir)
			if ca.Subject.String() != "CN=etcd-ca,O=Acme etcd,C=DE" || !ca.IsCA || len(ca.SubjectKeyId) == 0 {
				t.Fatalf("the CA: %s CA=%v SKI=%x", ca.Subject, ca.IsCA, ca.SubjectKeyId)
			}
			leaf := writeLeaf(t, dir, ca, key, leafOptions{})
			code, out := certcheck(t, "verify", "--ca", filepath.Join(dir, "ca.crt"), "--host", "127.0.0.1", leaf)
			if code != 0 || !strings.HasPrefix(out, "ok ") {
				t.Fatalf("verify: %d %s", code, out)
			}
			if code, out := certcheck(t, "verify", "--ca", filepath.Join(dir, "ca.crt"), "--host", "10.0.0.9", leaf); code != 1 || !strings.Contains(out, "10.0.0.9") {
				t.Fatalf("another host: %d %s", code, out)
			}
		})
	}
}

func TestKeyFormsAsGoToolsWriteThem(t *testing.T) {
	for kind, label := range map[string]string{"rsa2048": "RSA PRIVATE KEY", "p384": "EC PRIVATE KEY", "ed25519": "PRIVATE KEY"} {
		dir := t.TempDir()
		if code, out := certcheck(t, "make-ca", "--out", dir, "--key", kind); code != 0 {
			t.Fatal(out)
		}
		data, _ := os.ReadFile(filepath.Join(dir, "ca.key"))
		if !strings.HasPrefix(string(data), "-----BEGIN "+label+"-----") {
			t.Fatalf("%s: %.40s", kind, data)
		}
	}
	dir := t.TempDir()
	if code, _ := certcheck(t, "make-ca", "--out", dir, "--key", "p256", "--key-format", "pkcs1"); code != 2 {
		t.Fatalf("an EC key as PKCS#1 is bad usage, got %d", code)
	}
	if code, _ := certcheck(t, "make-ca", "--out", dir, "--key", "p256", "--no-subject-key-id"); code != 0 {
		t.Fatal("make-ca --no-subject-key-id failed")
	}
	if ca, _ := loadCA(t, dir); len(ca.SubjectKeyId) != 0 {
		t.Fatalf("--no-subject-key-id: the CA has %x", ca.SubjectKeyId)
	}
}

func TestRefusesWhatOtherVerifiersCannotChain(t *testing.T) {
	dir := t.TempDir()
	if code, out := certcheck(t, "make-ca", "--out", dir, "--key", "p256", "--subject", "O=Acme etcd,CN=etcd-ca"); code != 0 {
		t.Fatal(out)
	}
	ca, key := loadCA(t, dir)
	caFile := filepath.Join(dir, "ca.crt")

	// The same name as UTF8String where the CA has PrintableString: Go finds no parent.
	var rdns pkix.RDNSequence
	for _, a := range []struct {
		oid asn1.ObjectIdentifier
		v   string
	}{{asn1.ObjectIdentifier{2, 5, 4, 10}, "Acme etcd"}, {asn1.ObjectIdentifier{2, 5, 4, 3}, "etcd-ca"}} {
		rdns = append(rdns, pkix.RelativeDistinguishedNameSET{{Type: a.oid, Value: asn1.RawValue{Tag: asn1.TagUTF8String, Bytes: []byte(a.v)}}})
	}
	utf8Name, _ := asn1.Marshal(rdns)
	leaf := writeLeaf(t, dir, ca, key, leafOptions{issuer: utf8Name})
	if code, out := certcheck(t, "verify", "--ca", caFile, leaf); code != 1 || !strings.Contains(out, "unknown authority") {
		t.Fatalf("re-encoded issuer: %d %s", code, out)
	}

	// An authority key identifier that is not the CA's subject key identifier.
	leaf = writeLeaf(t, dir, ca, key, leafOptions{authorityKeyID: []byte{1, 2, 3, 4}})
	if code, out := certcheck(t, "verify", "--ca", caFile, leaf); code != 1 || !strings.Contains(out, "authority key identifier") {
		t.Fatalf("another AKI: %d %s", code, out)
	}

	// A client's certificate (kube-apiserver's for etcd) is no server's: judged as a client's only.
	leaf = writeLeaf(t, dir, ca, key, leafOptions{clientOnly: true})
	if code, out := certcheck(t, "verify", "--ca", caFile, leaf); code != 1 || !strings.Contains(out, "as a TLS server certificate") {
		t.Fatalf("client only, both usages: %d %s", code, out)
	}
	if code, out := certcheck(t, "verify", "--ca", caFile, "--usage", "client", leaf); code != 0 {
		t.Fatalf("client only, --usage client: %d %s", code, out)
	}

	// A CA certificate is no leaf; no arguments is bad usage.
	if code, out := certcheck(t, "verify", "--ca", caFile, caFile); code != 1 || !strings.Contains(out, "is a CA") {
		t.Fatalf("the CA as a leaf: %d %s", code, out)
	}
	if code, _ := certcheck(t, "verify", "--ca", caFile); code != 2 {
		t.Fatalf("no leaf: %d", code)
	}
}
