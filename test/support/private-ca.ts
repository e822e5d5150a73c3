/**
 * A private CA and a server certificate it signed (for 127.0.0.1 and localhost), made with
 * openssl in a directory of the test's own.
 */
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { P256_NEW_KEY, opensslP256Ca } from "./operator-cas.ts";

export interface PrivateCa {
  /** The CA's certificate (what clients trust). */
  ca: string;
  /** The server's certificate chain and key. */
  cert: string;
  key: string;
}

export function makePrivateCa(dir: string): PrivateCa {
  const f = (name: string) => join(dir, name);
  const openssl = (...args: string[]) => execFileSync("openssl", args, { stdio: ["ignore", "ignore", "pipe"] });
  opensslP256Ca(dir, {
    subject: "/CN=join-broker test CA",
    days: 2,
    cert: "ca.pem",
    extra: ["-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
  });
  openssl("req", ...P256_NEW_KEY, "-keyout", f("server.key"), "-out", f("server.csr"), "-subj", "/CN=broker.test");
  writeFileSync(f("server.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n");
  openssl(
    "x509",
    "-req",
    "-in",
    f("server.csr"),
    "-CA",
    f("ca.pem"),
    "-CAkey",
    f("ca.key"),
    "-CAcreateserial",
    "-out",
    f("server.pem"),
    "-days",
    "2",
    "-extfile",
    f("server.ext"),
  );
  return { ca: f("ca.pem"), cert: f("server.pem"), key: f("server.key") };
}
