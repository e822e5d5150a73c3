// Command certcheck judges etcd certificates the way etcd and every Kubernetes component judge
// them: with Go's crypto/x509. It also makes CAs the way Go tools (kubeadm, cfssl) write them.
//
//	certcheck verify --ca CA.pem [--intermediate FILE]... [--host NAME]... [--at TIME]
//	                 [--usage both|server|client] LEAF.pem...
//
// Each LEAF must chain to the first certificate in CA.pem, the only root (system roots are never
// used), through the given intermediates, for TLS servers and for TLS clients both (etcd uses one
// certificate for either end of its peer connections; --usage client for a client's only, such
// as kube-apiserver's). Beyond x509.Verify it checks what other
// verifiers depend on: the leaf's issuer is its parent's subject byte for byte, its authority key
// identifier is its parent's subject key identifier when the parent has one, and it is no CA
// itself. With --host, the leaf must also be valid for each NAME (a host name or IP address).
// With --at (RFC 3339), validity is judged at that time instead of now.
// One line per leaf on stdout, "ok FILE: …"; the first failure on stderr, "FILE: reason".
//
//	certcheck make-ca --out DIR --key rsa2048|rsa3072|rsa4096|p256|p384|p521|ed25519
//	                  [--key-format pkcs1|sec1|pkcs8] [--subject C=DE,O=Acme,CN=etcd-ca]
//	                  [--days N] [--no-subject-key-id]
//
// Writes DIR/ca.crt and DIR/ca.key: a self-signed CA made by x509.CreateCertificate, the key in
// the form Go tools write by default (RSA: PKCS#1, ECDSA: SEC1, Ed25519: PKCS#8) unless
// --key-format says otherwise. The subject's attributes are in the given order, encoded as Go
// encodes them (PrintableString when it can, else UTF8String).
//
// Exit codes: 0 good, 1 a certificate fails (verify) or cannot be made (make-ca), 2 bad usage.
package main

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
	"encoding/asn1"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: certcheck verify --ca CA.pem [--intermediate FILE]... [--host NAME]... [--at TIME]
                        [--usage both|server|client] LEAF.pem...
       certcheck make-ca --out DIR --key rsa2048|rsa3072|rsa4096|p256|p384|p521|ed25519
                         [--key-format pkcs1|sec1|pkcs8] [--subject C=DE,O=Acme,CN=etcd-ca]
                         [--days N] [--no-subject-key-id]
`

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "verify":
		err = verifyCommand(args[1:], stdout)
	case "make-ca":
		err = makeCACommand(args[1:], stdout)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		err = usageError{fmt.Sprintf("unknown command %q", args[0])}
	}
	var u usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &u):
		fmt.Fprintf(stderr, "certcheck: %s\n%s", u.msg, usage)
		return 2
	default:
		fmt.Fprintln(stderr, err)
		return 1
	}
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func verifyCommand(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	caFile := fs.String("ca", "", "")
	var intermediates, hosts listFlag
	fs.Var(&intermediates, "intermediate", "")
	fs.Var(&hosts, "host", "")
	at := fs.String("at", "", "")
	use := fs.String("usage", "both", "")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	var when time.Time
	if *at != "" {
		t, err := time.Parse(time.RFC3339, *at)
		if err != nil {
			return usageError{fmt.Sprintf("--at %q: not an RFC 3339 time", *at)}
		}
		when = t
	}
	usages := map[string][]x509.ExtKeyUsage{
		"both":   {x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		"server": {x509.ExtKeyUsageServerAuth},
		"client": {x509.ExtKeyUsageClientAuth},
	}[*use]
	if usages == nil {
		return usageError{fmt.Sprintf("--usage %q: both, server or client", *use)}
	}
	if *caFile == "" || fs.NArg() == 0 {
		return usageError{"verify needs --ca and at least one certificate"}
	}
	root, err := readCertificate(*caFile)
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	roots.AddCert(root)
	pool := x509.NewCertPool()
	byFile := map[*x509.Certificate]string{root: *caFile}
	for _, f := range intermediates {
		c, err := readCertificate(f)
		if err != nil {
			return err
		}
		pool.AddCert(c)
		byFile[c] = f
	}
	for _, leafFile := range fs.Args() {
		leaf, err := readCertificate(leafFile)
		if err != nil {
			return err
		}
		line, err := verifyLeaf(leaf, x509.VerifyOptions{Roots: roots, Intermediates: pool, CurrentTime: when}, usages, hosts, byFile)
		if err != nil {
			return fmt.Errorf("%s: %w", leafFile, err)
		}
		fmt.Fprintf(stdout, "ok %s: %s\n", leafFile, line)
	}
	return nil
}

func verifyLeaf(leaf *x509.Certificate, options x509.VerifyOptions, usages []x509.ExtKeyUsage, hosts []string, byFile map[*x509.Certificate]string) (string, error) {
	if leaf.IsCA {
		return "", errors.New("is a CA certificate (basicConstraints CA:TRUE), not an end entity's")
	}
	var chain []*x509.Certificate
	for _, eku := range usages {
		options.KeyUsages = []x509.ExtKeyUsage{eku}
		chains, err := leaf.Verify(options)
		if err != nil {
			return "", fmt.Errorf("as a TLS %s certificate: %w", map[x509.ExtKeyUsage]string{x509.ExtKeyUsageServerAuth: "server", x509.ExtKeyUsageClientAuth: "client"}[eku], err)
		}
		chain = chains[0]
	}
	// Each certificate and its parent: the issuer and key identifiers as stored, byte for byte.
	for i := 0; i+1 < len(chain); i++ {
		child, parent := chain[i], chain[i+1]
		if !bytes.Equal(child.RawIssuer, parent.RawSubject) {
			return "", fmt.Errorf("the issuer of %q is not encoded as its parent's subject (%x, parent %x)", child.Subject, child.RawIssuer, parent.RawSubject)
		}
		if len(parent.SubjectKeyId) > 0 && !bytes.Equal(child.AuthorityKeyId, parent.SubjectKeyId) {
			return "", fmt.Errorf("the authority key identifier of %q is %s, its parent's subject key identifier %s", child.Subject, hexOrNone(child.AuthorityKeyId), hex.EncodeToString(parent.SubjectKeyId))
		}
	}
	for _, h := range hosts {
		if err := leaf.VerifyHostname(h); err != nil {
			return "", err
		}
	}
	names := make([]string, 0, len(chain))
	for _, c := range chain[1:] {
		if f, ok := byFile[c]; ok {
			names = append(names, f)
		}
	}
	return fmt.Sprintf("%s, issued by %s (%s), %s, chain %s", leaf.Subject, leaf.Issuer, leaf.SignatureAlgorithm, keyKind(leaf.PublicKey), strings.Join(names, " → ")), nil
}

func hexOrNone(b []byte) string {
	if len(b) == 0 {
		return "absent"
	}
	return hex.EncodeToString(b)
}

func readCertificate(file string) (*x509.Certificate, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: no PEM CERTIFICATE", file)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return c, nil
}

func keyKind(k crypto.PublicKey) string {
	switch k := k.(type) {
	case *rsa.PublicKey:
		return fmt.Sprintf("RSA %d", k.N.BitLen())
	case *ecdsa.PublicKey:
		return "ECDSA " + k.Curve.Params().Name
	case ed25519.PublicKey:
		return "Ed25519"
	default:
		return fmt.Sprintf("%T", k)
	}
}

func makeCACommand(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("make-ca", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	out := fs.String("out", "", "")
	kind := fs.String("key", "", "")
	format := fs.String("key-format", "", "")
	subject := fs.String("subject", "CN=etcd-ca", "")
	days := fs.Int("days", 3650, "")
	noSKI := fs.Bool("no-subject-key-id", false, "")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if *out == "" || *kind == "" || fs.NArg() > 0 {
		return usageError{"make-ca needs --out and --key"}
	}
	key, err := generateKey(*kind)
	if err != nil {
		return err
	}
	keyDER, keyType, err := marshalKey(key, *format)
	if err != nil {
		return err
	}
	name, err := parseSubject(*subject)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               name,
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(time.Duration(*days) * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	pub := key.(crypto.Signer).Public()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key)
	if err != nil {
		return err
	}
	if *noSKI {
		// CreateCertificate adds a subject key identifier to every CA; make one without it by
		// hand, so that a CA as older tools wrote it can be tested.
		if der, err = withoutSubjectKeyID(der, key.(crypto.Signer)); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(*out, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*out, "ca.key"), pem.EncodeToMemory(&pem.Block{Type: keyType, Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*out, "ca.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s and %s (%s, %s)\n", filepath.Join(*out, "ca.crt"), filepath.Join(*out, "ca.key"), *kind, keyType)
	return nil
}

func generateKey(kind string) (crypto.PrivateKey, error) {
	switch kind {
	case "rsa2048", "rsa3072", "rsa4096":
		bits := map[string]int{"rsa2048": 2048, "rsa3072": 3072, "rsa4096": 4096}[kind]
		return rsa.GenerateKey(rand.Reader, bits)
	case "p256":
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "p384":
		return ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "p521":
		return ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	case "ed25519":
		_, k, err := ed25519.GenerateKey(rand.Reader)
		return k, err
	}
	return nil, usageError{fmt.Sprintf("--key %q: one of rsa2048, rsa3072, rsa4096, p256, p384, p521, ed25519", kind)}
}

func marshalKey(key crypto.PrivateKey, format string) ([]byte, string, error) {
	if format == "" {
		switch key.(type) {
		case *rsa.PrivateKey:
			format = "pkcs1"
		case *ecdsa.PrivateKey:
			format = "sec1"
		default:
			format = "pkcs8"
		}
	}
	switch format {
	case "pkcs8":
		der, err := x509.MarshalPKCS8PrivateKey(key)
		return der, "PRIVATE KEY", err
	case "pkcs1":
		if k, ok := key.(*rsa.PrivateKey); ok {
			return x509.MarshalPKCS1PrivateKey(k), "RSA PRIVATE KEY", nil
		}
	case "sec1":
		if k, ok := key.(*ecdsa.PrivateKey); ok {
			der, err := x509.MarshalECPrivateKey(k)
			return der, "EC PRIVATE KEY", err
		}
	}
	return nil, "", usageError{fmt.Sprintf("--key-format %q does not fit this key", format)}
}

var attributeTypes = map[string]asn1.ObjectIdentifier{
	"C":  {2, 5, 4, 6},
	"ST": {2, 5, 4, 8},
	"L":  {2, 5, 4, 7},
	"O":  {2, 5, 4, 10},
	"OU": {2, 5, 4, 11},
	"CN": {2, 5, 4, 3},
}

// parseSubject reads "C=DE,O=Acme etcd,CN=etcd-ca" into a name with these attributes in this order.
func parseSubject(s string) (pkix.Name, error) {
	var rdns pkix.RDNSequence
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		oid, known := attributeTypes[strings.ToUpper(k)]
		if !ok || !known || v == "" {
			return pkix.Name{}, usageError{fmt.Sprintf("--subject %q: attributes are TYPE=value (C, ST, L, O, OU, CN), separated by commas", s)}
		}
		rdns = append(rdns, pkix.RelativeDistinguishedNameSET{{Type: oid, Value: v}})
	}
	// ExtraNames keeps the order given; Go encodes each value as PrintableString when it can.
	var name pkix.Name
	for _, rdn := range rdns {
		name.ExtraNames = append(name.ExtraNames, rdn[0])
	}
	return name, nil
}

// withoutSubjectKeyID re-signs a self-signed certificate without its subject key identifier.
func withoutSubjectKeyID(der []byte, key crypto.Signer) ([]byte, error) {
	var cert struct {
		TBS       asn1.RawValue
		Algorithm pkix.AlgorithmIdentifier
		Signature asn1.BitString
	}
	if _, err := asn1.Unmarshal(der, &cert); err != nil {
		return nil, err
	}
	var tbs struct {
		Raw        asn1.RawContent
		Version    int `asn1:"optional,explicit,default:0,tag:0"`
		Serial     *big.Int
		Algorithm  pkix.AlgorithmIdentifier
		Issuer     asn1.RawValue
		Validity   asn1.RawValue
		Subject    asn1.RawValue
		PublicKey  asn1.RawValue
		Extensions []pkix.Extension `asn1:"optional,explicit,tag:3"`
	}
	if _, err := asn1.Unmarshal(cert.TBS.FullBytes, &tbs); err != nil {
		return nil, err
	}
	var kept []pkix.Extension
	for _, e := range tbs.Extensions {
		if !e.Id.Equal(asn1.ObjectIdentifier{2, 5, 29, 14}) {
			kept = append(kept, e)
		}
	}
	tbs.Extensions = kept
	tbs.Raw = nil
	tbsDER, err := asn1.Marshal(tbs)
	if err != nil {
		return nil, err
	}
	parsed, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	var digest []byte
	var opts crypto.SignerOpts = crypto.Hash(0)
	switch parsed.SignatureAlgorithm {
	case x509.SHA256WithRSA, x509.ECDSAWithSHA256:
		h := crypto.SHA256.New()
		h.Write(tbsDER)
		digest, opts = h.Sum(nil), crypto.SHA256
	case x509.ECDSAWithSHA384:
		h := crypto.SHA384.New()
		h.Write(tbsDER)
		digest, opts = h.Sum(nil), crypto.SHA384
	case x509.ECDSAWithSHA512:
		h := crypto.SHA512.New()
		h.Write(tbsDER)
		digest, opts = h.Sum(nil), crypto.SHA512
	case x509.PureEd25519:
		digest = tbsDER
	default:
		return nil, fmt.Errorf("cannot re-sign a %s certificate", parsed.SignatureAlgorithm)
	}
	sig, err := key.Sign(rand.Reader, digest, opts)
	if err != nil {
		return nil, err
	}
	return asn1.Marshal(struct {
		TBS       asn1.RawValue
		Algorithm pkix.AlgorithmIdentifier
		Signature asn1.BitString
	}{asn1.RawValue{FullBytes: tbsDER}, cert.Algorithm, asn1.BitString{Bytes: sig, BitLength: len(sig) * 8}})
}
