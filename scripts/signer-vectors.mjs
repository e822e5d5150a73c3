// `npm run vectors:signer`: regenerates integrations/vectors/signer-vectors.json, the certificate
// request cases every join API signer (TypeScript in src/node/join-api/signer.ts, Go in
// integrations/go/joinhandler) is held to.
//
// The requests are made by openssl, the tool operators and installers make them with, not by the
// signers' own code: a case checks a signer against what the world sends. Each case is one
// request of one kind (peer or server), sent together with the file's good request of the other
// kind, for the admission the file names (or the case's own), and says what the signer answers:
// the names the issued certificate of that kind carries, or the refusal's status and code.
// Keys and requests change when the file is remade; the cases do not.
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureTool } from "./tools.mjs";

const OUT = new URL("../integrations/vectors/signer-vectors.json", import.meta.url);
const NODE = "ctrl-1";
const PEER_URL = "https://10.0.0.11:2380";
const openssl = ensureTool("openssl");
const dir = mkdtempSync(join(tmpdir(), "signer-vectors-"));

const run = (args, input) => execFileSync(openssl, args, { cwd: dir, input, stdio: [input === undefined ? "ignore" : "pipe", "pipe", "pipe"] }).toString();
let n = 0;

/** A private key file of this kind; returns its name. */
function key(kind) {
  const file = `k${++n}.key`;
  const [alg, opt] = kind.split(":");
  if (alg === "rsa") run(["genpkey", "-algorithm", "RSA", "-pkeyopt", `rsa_keygen_bits:${opt}`, "-out", file]);
  else if (alg === "rsa-pss") run(["genpkey", "-algorithm", "RSA-PSS", "-pkeyopt", `rsa_keygen_bits:${opt}`, "-out", file]);
  else if (alg === "ec") run(["genpkey", "-algorithm", "EC", "-pkeyopt", `ec_paramgen_curve:${opt}`, "-out", file]);
  else if (alg === "ed25519") run(["genpkey", "-algorithm", "ED25519", "-out", file]);
  else if (alg === "dsa") {
    run(["genpkey", "-genparam", "-algorithm", "DSA", "-pkeyopt", "dsa_paramgen_bits:2048", "-out", `${file}.params`]);
    run(["genpkey", "-paramfile", `${file}.params`, "-out", file]);
  } else throw new Error(`unknown key kind ${kind}`);
  return file;
}

/**
 * A PEM request. `subject` as openssl writes it ("/CN=a/CN=b"; "" for none), `san` as
 * subjectAltName's value ("IP:10.0.0.11,DNS:localhost"), `digest` and `sigopt` for its signature.
 */
function csr({ keyFile = key("ec:P-256"), subject = `/CN=${NODE}`, san, digest, sigopt = [] } = {}) {
  const args = [
    "req",
    "-new",
    "-key",
    keyFile,
    "-subj",
    subject === "" ? "/" : subject,
    ...(digest ? [`-${digest}`] : []),
    ...sigopt.flatMap((o) => ["-sigopt", o]),
  ];
  if (san) args.push("-addext", `subjectAltName=${san}`);
  return run(args);
}

/** The request with one bit of its signature flipped (its last byte): well-formed, but not from the key's holder. */
function tampered(pem) {
  const der = Buffer.from(pem.replace(/-----[^-]+-----|\s/g, ""), "base64");
  der[der.length - 1] ^= 0x01;
  return `-----BEGIN CERTIFICATE REQUEST-----\n${der
    .toString("base64")
    .replace(/(.{64})/g, "$1\n")
    .trim()}\n-----END CERTIFICATE REQUEST-----\n`;
}

const ok = (hosts) => ({ ok: true, hosts });
const no = (status, code) => ({ ok: false, status, code });
const invalid = no(400, "invalid_csr");
const notAllowed = no(422, "csr_name_not_allowed");

try {
  const goodPeerKey = key("ec:P-256");
  const good = { peer: csr({ keyFile: goodPeerKey, san: "IP:10.0.0.11" }), server: csr({ san: "IP:10.0.0.11,IP:127.0.0.1" }) };
  const many = (count, name) => Array.from({ length: count }, () => name).join(",");

  const cases = [
    // Keys: ECDSA P-256 and P-384, RSA 2048 to 8192 bits; nothing else.
    { name: "ECDSA P-256", kind: "peer", csr: csr({ san: "IP:10.0.0.11" }), expect: ok(["10.0.0.11"]) },
    { name: "ECDSA P-384", kind: "peer", csr: csr({ keyFile: key("ec:P-384"), san: "IP:10.0.0.11" }), expect: ok(["10.0.0.11"]) },
    { name: "RSA 2048", kind: "peer", csr: csr({ keyFile: key("rsa:2048"), san: "IP:10.0.0.11" }), expect: ok(["10.0.0.11"]) },
    { name: "RSA 3072 on the server certificate", kind: "server", csr: csr({ keyFile: key("rsa:3072"), san: "IP:10.0.0.11" }), expect: ok(["10.0.0.11"]) },
    { name: "RSA 1024", kind: "peer", csr: csr({ keyFile: key("rsa:1024"), san: "IP:10.0.0.11" }), expect: invalid },
    { name: "RSA 2047", kind: "peer", csr: csr({ keyFile: key("rsa:2047"), san: "IP:10.0.0.11" }), expect: invalid },
    { name: "RSA 8200 (beyond what Go's TLS takes)", kind: "server", csr: csr({ keyFile: key("rsa:8200"), san: "IP:10.0.0.11" }), expect: invalid },
    { name: "ECDSA P-224", kind: "peer", csr: csr({ keyFile: key("ec:P-224"), san: "IP:10.0.0.11" }), expect: invalid },
    { name: "ECDSA P-521", kind: "peer", csr: csr({ keyFile: key("ec:P-521"), san: "IP:10.0.0.11" }), expect: invalid },
    { name: "ECDSA secp256k1", kind: "server", csr: csr({ keyFile: key("ec:secp256k1"), san: "IP:10.0.0.11" }), expect: invalid },
    { name: "Ed25519", kind: "peer", csr: csr({ keyFile: key("ed25519"), san: "IP:10.0.0.11" }), expect: invalid },
    { name: "an RSA-PSS key (id-RSASSA-PSS)", kind: "peer", csr: csr({ keyFile: key("rsa-pss:2048"), san: "IP:10.0.0.11" }), expect: invalid },
    { name: "DSA 2048", kind: "server", csr: csr({ keyFile: key("dsa"), san: "IP:10.0.0.11" }), expect: invalid },
    // Signatures: ECDSA or RSA PKCS#1 v1.5 over SHA-2 only (Go reads no PSS signature but one
    // whose salt is the hash's length, which openssl does not make by default), and they must hold.
    { name: "RSA 2048 signed over SHA-1", kind: "peer", csr: csr({ keyFile: key("rsa:2048"), san: "IP:10.0.0.11", digest: "sha1" }), expect: invalid },
    {
      name: "RSA 2048 with a PSS signature",
      kind: "peer",
      csr: csr({ keyFile: key("rsa:2048"), san: "IP:10.0.0.11", sigopt: ["rsa_padding_mode:pss"] }),
      expect: invalid,
    },
    { name: "ECDSA P-256 signed over SHA-512", kind: "peer", csr: csr({ san: "IP:10.0.0.11", digest: "sha512" }), expect: ok(["10.0.0.11"]) },
    { name: "a signature that does not hold", kind: "peer", csr: tampered(csr({ san: "IP:10.0.0.11" })), expect: invalid },
    {
      name: "not a request",
      kind: "server",
      csr: "-----BEGIN CERTIFICATE REQUEST-----\nbm90IGEgcmVxdWVzdA==\n-----END CERTIFICATE REQUEST-----\n",
      expect: invalid,
    },
    { name: "not PEM", kind: "peer", csr: "junk", expect: invalid },
    { name: "the peer key again on the server certificate", kind: "server", csr: csr({ keyFile: goodPeerKey, san: "IP:10.0.0.11" }), expect: invalid },
    // Common names: every one must be the node's.
    { name: "another node's common name", kind: "peer", csr: csr({ subject: "/CN=ctrl-2", san: "IP:10.0.0.11" }), expect: notAllowed },
    { name: "CN=root before the node's", kind: "peer", csr: csr({ subject: `/CN=root/CN=${NODE}`, san: "IP:10.0.0.11" }), expect: notAllowed },
    { name: "the node's CN before CN=root", kind: "server", csr: csr({ subject: `/CN=${NODE}/CN=root`, san: "IP:10.0.0.11" }), expect: notAllowed },
    { name: "the node's CN twice", kind: "peer", csr: csr({ subject: `/CN=${NODE}/CN=${NODE}`, san: "IP:10.0.0.11" }), expect: ok(["10.0.0.11"]) },
    { name: "no common name", kind: "peer", csr: csr({ subject: "/O=anything", san: "IP:10.0.0.11" }), expect: ok(["10.0.0.11"]) },
    { name: "the node's CN in another case", kind: "peer", csr: csr({ subject: "/CN=CTRL-1", san: "IP:10.0.0.11" }), expect: notAllowed },
    {
      name: "a reserved node's own request",
      kind: "peer",
      node: "root",
      csr: csr({ subject: "/CN=root", san: "IP:10.0.0.11" }),
      good: "own",
      expect: notAllowed,
    },
    {
      name: "a reserved node name in another case",
      kind: "peer",
      node: "Kube-APIServer",
      csr: csr({ subject: "/CN=Kube-APIServer", san: "IP:10.0.0.11" }),
      good: "own",
      expect: notAllowed,
    },
    // Names: the peer certificate exactly the admitted host; the server certificate that host and loopback.
    { name: "loopback on the peer certificate", kind: "peer", csr: csr({ san: "IP:127.0.0.1" }), expect: notAllowed },
    { name: "another peer host", kind: "peer", csr: csr({ san: "IP:10.0.0.12" }), expect: notAllowed },
    { name: "no names on the peer certificate (it gets the admitted host)", kind: "peer", csr: csr(), expect: ok(["10.0.0.11"]) },
    {
      name: "the admitted host and every loopback name",
      kind: "server",
      csr: csr({ san: "IP:10.0.0.11,IP:127.0.0.1,IP:::1,DNS:localhost" }),
      expect: ok(["localhost", "10.0.0.11", "127.0.0.1", "::1"]),
    },
    { name: "localhost in upper case", kind: "server", csr: csr({ san: "DNS:LOCALHOST" }), expect: ok(["localhost"]) },
    { name: "::1 written in full", kind: "server", csr: csr({ san: "IP:0:0:0:0:0:0:0:1" }), expect: ok(["::1"]) },
    { name: "loopback as an IPv4-mapped IPv6 address", kind: "server", csr: csr({ san: "IP:::ffff:127.0.0.1" }), expect: notAllowed },
    { name: "the peer host as an IPv4-mapped IPv6 address", kind: "peer", csr: csr({ san: "IP:::ffff:10.0.0.11" }), expect: notAllowed },
    { name: "an address written as a DNS name", kind: "server", csr: csr({ san: "DNS:127.0.0.1" }), expect: notAllowed },
    { name: "another host on the server certificate", kind: "server", csr: csr({ san: "IP:10.0.0.11,DNS:evil.example" }), expect: notAllowed },
    { name: "a URI", kind: "server", csr: csr({ san: "IP:10.0.0.11,URI:https://10.0.0.11" }), expect: notAllowed },
    { name: "an e-mail address", kind: "server", csr: csr({ san: "IP:10.0.0.11,email:root@10.0.0.11" }), expect: notAllowed },
    { name: "an otherName", kind: "server", csr: csr({ san: "IP:10.0.0.11,otherName:1.3.6.1.4.1.311.20.2.3;UTF8:root" }), expect: notAllowed },
    {
      name: "duplicates, kept once",
      kind: "server",
      csr: csr({ san: `${many(5, "IP:127.0.0.1")},${many(3, "DNS:localhost")},IP:10.0.0.11,DNS:Localhost` }),
      expect: ok(["localhost", "127.0.0.1", "10.0.0.11"]),
    },
    { name: "16 names (the most read)", kind: "server", csr: csr({ san: many(16, "IP:127.0.0.1") }), expect: ok(["127.0.0.1"]) },
    { name: "17 names", kind: "server", csr: csr({ san: many(17, "IP:127.0.0.1") }), expect: invalid },
    { name: "60 copies of the peer host", kind: "peer", csr: csr({ san: many(60, "IP:10.0.0.11") }), expect: invalid },
    { name: "no names on the server certificate (it gets the peer host)", kind: "server", csr: csr(), expect: ok(["10.0.0.11"]) },
    // The API server's client certificate (asked for beside the other two): CN kube-apiserver or none, no names.
    { name: "the API server's client certificate", kind: "client", csr: csr({ subject: "/CN=kube-apiserver" }), expect: ok([]) },
    { name: "a client certificate without a common name", kind: "client", csr: csr({ subject: "/O=anything" }), expect: ok([]) },
    { name: "a client certificate in RSA 2048", kind: "client", csr: csr({ keyFile: key("rsa:2048"), subject: "/CN=kube-apiserver" }), expect: ok([]) },
    { name: "a client certificate naming the node", kind: "client", csr: csr({ subject: `/CN=${NODE}` }), expect: notAllowed },
    { name: "a client certificate naming root", kind: "client", csr: csr({ subject: "/CN=root" }), expect: notAllowed },
    { name: "a client certificate with an address", kind: "client", csr: csr({ subject: "/CN=kube-apiserver", san: "IP:127.0.0.1" }), expect: notAllowed },
    { name: "a client certificate with RSA 1024", kind: "client", csr: csr({ keyFile: key("rsa:1024"), subject: "/CN=kube-apiserver" }), expect: invalid },
    { name: "a client certificate with the peer's key", kind: "client", csr: csr({ keyFile: goodPeerKey, subject: "/CN=kube-apiserver" }), expect: invalid },
    // Other admissions: an IPv6 and a DNS peer URL.
    {
      name: "an IPv6 peer host written in full",
      kind: "peer",
      peerURL: "https://[fd00::11]:2380",
      csr: csr({ san: "IP:fd00:0:0:0:0:0:0:11" }),
      good: "own",
      expect: ok(["fd00::11"]),
    },
    {
      name: "a DNS peer host in mixed case",
      kind: "peer",
      peerURL: "https://ctrl-1.example:2380",
      csr: csr({ san: "DNS:CTRL-1.Example" }),
      good: "own",
      expect: ok(["ctrl-1.example"]),
    },
    {
      name: "a DNS peer host as the server's, with loopback",
      kind: "server",
      peerURL: "https://ctrl-1.example:2380",
      csr: csr({ san: "DNS:ctrl-1.example,IP:::1" }),
      good: "own",
      expect: ok(["ctrl-1.example", "::1"]),
    },
  ];

  // A case with `good: "own"` (another admission) is sent with a good request of the other kind
  // for that admission; the others with the file's.
  for (const c of cases) {
    if (c.good !== "own") continue;
    const node = c.node ?? NODE;
    const host = new URL(c.peerURL ?? PEER_URL).hostname.replace(/^\[|\]$/g, "");
    const ip = /^[0-9.]+$|:/.test(host);
    const san = ip ? `IP:${host}` : `DNS:${host}`;
    c.good = { peer: csr({ subject: `/CN=${node}`, san }), server: csr({ subject: `/CN=${node}`, san }) };
  }

  const file = {
    description:
      "Certificate request vectors for the join API's signers, made by scripts/signer-vectors.mjs with openssl. Check each case as a join API does: the admission is `admission` (or the case's `node` and `peerURL`); the requests are the `good` peer and server requests (the case's own `good` when it has one) with the case's `csr` as its `kind` (`peer`, `server`, or `client`: the API server's client certificate, asked for beside them). `expect` is the refusal's HTTP status and code, or `ok` with the subject alternative names the issued certificate of that kind carries (canonical, each once, DNS names before addresses as Go writes them; a request naming none gets the admitted peer host).",
    generatedAt: new Date().toISOString(),
    admission: { node: NODE, peerURL: PEER_URL },
    good,
    cases: cases.map((c) => ({
      name: c.name,
      kind: c.kind,
      ...(c.node ? { node: c.node } : {}),
      ...(c.peerURL ? { peerURL: c.peerURL } : {}),
      csr: c.csr,
      ...(typeof c.good === "object" ? { good: c.good } : {}),
      expect: c.expect,
    })),
  };
  writeFileSync(OUT, `${JSON.stringify(file, null, 2)}\n`);
  console.log(`Wrote ${file.cases.length} cases to ${OUT.pathname}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
