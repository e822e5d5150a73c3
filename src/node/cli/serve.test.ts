import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { refusalOf } from "./cli-test-kit.ts";
import { parseOnly } from "./command.ts";
import { defineServe, parseServe } from "./serve.ts";
import { isLoopback, listen } from "./values.ts";

const TOKEN = { JOIN_BROKER_ADMIN_TOKEN: "admin-token-0123456789" };
const dir = mkdtempSync(join(tmpdir(), "serve-options-"));
const file = (name: string, text: string) => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};
const parse = (argv: string[], env: NodeJS.ProcessEnv = TOKEN) => parseServe(argv, env);
const options = (argv: string[], env: NodeJS.ProcessEnv = TOKEN) => {
  const r = parse(argv, env);
  if (r === null) throw new Error("help");
  return r;
};
const usage = (argv: string[], env: NodeJS.ProcessEnv = TOKEN) => refusalOf(() => parse(argv, env));

describe("join-broker serve flags", () => {
  it("--help explains every flag", () => {
    expect(parse(["--help"])).toBeNull();
    const help = parseOnly("serve", defineServe, [])?.parent?.commands[0].helpInformation() ?? "";
    for (const flag of [
      "--listen",
      "--data-dir",
      "--tls-cert",
      "--tls-key",
      "--insecure-http",
      "--admin-token-file",
      "--issuer",
      "--log-level",
      "--client-ip-header",
      "JOIN_BROKER_ADMIN_TOKEN",
    ])
      expect(help).toContain(flag);
  });

  it("parses an address, a data dir and the token from the environment", () => {
    expect(options(["--listen", "127.0.0.1:8443", "--data-dir", "/tmp/jb"])).toEqual({
      host: "127.0.0.1",
      port: 8443,
      dataDir: "/tmp/jb",
      adminToken: TOKEN.JOIN_BROKER_ADMIN_TOKEN,
      tls: undefined,
      issuer: undefined,
      logLevel: undefined,
      clientIpHeader: undefined,
    });
    expect(listen("[::1]:0", "--listen", undefined)).toEqual({ host: "::1", port: 0 });
    expect(options(["--listen", "127.0.0.1:1"], { ...TOKEN, STATE_DIRECTORY: "/var/lib/join-broker" }).dataDir).toBe("/var/lib/join-broker");
  });

  it("takes an empty JOIN_BROKER_ADMIN_TOKEN as unset, so that DIR/admin-token applies", () => {
    expect(options(["--listen", "127.0.0.1:1", "--data-dir", "/tmp/jb"], { JOIN_BROKER_ADMIN_TOKEN: " " }).adminToken).toBeUndefined();
  });

  it("reads the admin token from a file, never from the command line", () => {
    const tokenFile = file("token", "from-a-file-0123456789\n");
    expect(options(["--listen", "127.0.0.1:1", "--data-dir", dir, "--admin-token-file", tokenFile], {}).adminToken).toBe("from-a-file-0123456789");
    expect(usage(["--listen", "127.0.0.1:1", "--data-dir", dir, "--admin-token", "x".repeat(20)])).toContain("not accepted by serve");
    expect(options(["--listen", "127.0.0.1:1", "--data-dir", dir], {}).adminToken).toBeUndefined(); // serve keeps one in DIR
    expect(usage(["--listen", "127.0.0.1:1", "--data-dir", dir, "--admin-token-file", file("empty", "\n")], {})).toContain("is empty");
    expect(usage(["--listen", "127.0.0.1:1", "--data-dir", dir], { JOIN_BROKER_ADMIN_TOKEN: "short" })).toContain("at least 16");
    // Only what a bearer header can carry: anything else would be refused on every request.
    for (const bad of ["Correct-Horse!Battery#Staple", "correct horse battery staple", "padding=in-the-middle-0123", "üñíçødé-token-0123456789"]) {
      expect(usage(["--listen", "127.0.0.1:1", "--data-dir", dir], { JOIN_BROKER_ADMIN_TOKEN: bad })).toContain("A-Z a-z 0-9 - . _ ~ + /");
    }
    expect(options(["--listen", "127.0.0.1:1", "--data-dir", dir], { JOIN_BROKER_ADMIN_TOKEN: "Aa0-._~+/Zz9-token==" }).adminToken).toBe(
      "Aa0-._~+/Zz9-token==",
    );
    expect(usage(["--listen", "127.0.0.1:1", "--data-dir", dir, "--admin-token-file", join(dir, "missing")])).toContain("cannot read --admin-token-file");
  });

  it("refuses plain HTTP on a non-loopback address unless --insecure-http", () => {
    expect(usage(["--listen", "0.0.0.0:8443", "--data-dir", dir])).toContain("refusing plain HTTP on 0.0.0.0");
    expect(usage(["--listen", "10.1.2.3:80", "--data-dir", dir])).toContain("--tls-cert");
    expect(options(["--listen", "0.0.0.0:8443", "--data-dir", dir, "--insecure-http"]).host).toBe("0.0.0.0");
    for (const host of ["127.0.0.1", "127.9.9.9", "::1", "localhost"]) expect(isLoopback(host)).toBe(true);
    for (const host of ["0.0.0.0", "::", "10.0.0.1", "example.com", "128.0.0.1"]) expect(isLoopback(host)).toBe(false);
  });

  it("takes TLS files that hold a certificate and a key, both or neither", () => {
    const cert = file("cert.pem", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
    const key = file("key.pem", "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n");
    expect(options(["--listen", "0.0.0.0:443", "--data-dir", dir, "--tls-cert", cert, "--tls-key", key]).tls).toEqual({ cert, key });
    expect(usage(["--listen", "0.0.0.0:443", "--data-dir", dir, "--tls-cert", cert])).toContain("go together");
    expect(usage(["--listen", "0.0.0.0:443", "--data-dir", dir, "--tls-cert", key, "--tls-key", key])).toContain("holds no PEM certificate");
    expect(usage(["--listen", "0.0.0.0:443", "--data-dir", dir, "--tls-cert", cert, "--tls-key", cert])).toContain("holds no PEM private key");
  });

  it("says what is wrong with a bad address, issuer or log level", () => {
    expect(usage(["--data-dir", dir])).toContain("--listen HOST:PORT is required");
    expect(usage(["--listen", "127.0.0.1:1"])).toContain("--data-dir DIR is required");
    expect(usage(["--listen", "8443", "--data-dir", dir])).toContain("is not HOST:PORT");
    expect(usage(["--listen", "::1:8443", "--data-dir", dir])).toContain("in brackets");
    expect(usage(["--listen", "127.0.0.1:70000", "--data-dir", dir])).toContain("out of range");
    expect(usage(["--listen", "127.0.0.1:1", "--data-dir", dir, "--issuer", "https://b.example/path"])).toContain("must be an origin");
    expect(options(["--listen", "127.0.0.1:1", "--data-dir", dir, "--issuer", "https://b.example/"]).issuer).toBe("https://b.example");
    expect(usage(["--listen", "127.0.0.1:1", "--data-dir", dir, "--log-level", "trace"])).toContain("debug, info, warn");
    expect(usage(["--listen", "127.0.0.1:1", "--data-dir", dir, "--port", "1"])).toContain("--port");
  });

  it("says which of serve and serve restore a flag belongs to", () => {
    const refusal = (argv: string[]) => refusalOf(() => parseOnly("serve", defineServe, argv, TOKEN));
    expect(refusal(["restore", "--listen", "127.0.0.1:1"])).toBe("--listen does not apply to 'restore'");
    expect(refusal(["--listen", "127.0.0.1:1", "--from", "/backup"])).toBe("--from goes after its subcommand: 'restore'");
    expect(refusal(["restore", "--form", "/backup"])).toBe("unknown flag '--form'; did you mean '--from'?");
  });
});
