import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { AgentOptions } from "../agent/core/agent-options.ts";
import { testAgentOptions } from "../agent/core/agent-test-kit.ts";
import { refusalOf } from "./cli-test-kit.ts";
import { parseJoin } from "./join.ts";

const REQUIRED = [
  "--broker",
  "https://broker.example/",
  "--cluster",
  "prod-eu",
  "--token",
  "jbe_abc",
  "--node",
  "ctrl-1",
  "--peer-url",
  "https://10.0.0.4:2380/",
  "--join-api",
  "https://10.0.0.2:9443",
  "--state-dir",
  "/var/lib/jb",
];

function options(argv: string[], env: Record<string, string | undefined> = {}): AgentOptions {
  const parsed = parseJoin(argv, env);
  if (parsed === null) throw new Error("unexpected help");
  return parsed;
}

const usageError = (argv: string[], env: Record<string, string | undefined> = {}) => refusalOf(() => parseJoin(argv, env));

describe("join flags", () => {
  it("reads the protocol's flags and fills in the defaults", () => {
    // What the broker, etcd and the join API are given: canonical URLs, absolute paths.
    expect(options(REQUIRED)).toMatchObject({
      brokerUrl: "https://broker.example",
      cluster: "prod-eu",
      token: "jbe_abc",
      node: "ctrl-1",
      peerURL: "https://10.0.0.4:2380",
      listenPeerURL: "https://10.0.0.4:2380",
      joinApiUrl: "https://10.0.0.2:9443",
      stateDir: "/var/lib/jb",
      dataDir: "/var/lib/jb/etcd",
      logFormat: "text",
    });
    // Every other default, as the agent's own unit tests take them (agent-test-kit.ts): the kit
    // gives what this command line gives.
    const root = "/var/lib/jb-test";
    const kit = testAgentOptions(root);
    const argv = [
      "--broker",
      kit.brokerUrl,
      "--cluster",
      kit.cluster,
      "--token",
      kit.token,
      "--node",
      kit.node,
      "--peer-url",
      kit.peerURL,
      "--join-api",
      kit.joinApiUrl,
      "--state-dir",
      kit.stateDir,
      "--log-format",
      "json",
    ];
    expect(options(argv)).toEqual(kit);
  });

  it("takes etcd options, extra etcd flags written inline, and behaviour flags", () => {
    const o = options([
      ...REQUIRED,
      "--etcd-bin",
      "/usr/bin/etcd",
      "--data-dir",
      "/data/etcd",
      "--client-url",
      "http://127.0.0.1:12379",
      "--etcd-arg=--heartbeat-interval=50",
      "--etcd-arg=--election-timeout=500",
      "--timeout",
      "0",
      "--log-format",
      "json",
      "--print-etcd-flags",
      "--retry-revoked",
    ]);
    expect(o.etcdBin).toBe("/usr/bin/etcd");
    expect(o.dataDir).toBe("/data/etcd");
    expect(o.clientURL).toBe("http://127.0.0.1:12379");
    expect(o.etcdArgs).toEqual(["--heartbeat-interval=50", "--election-timeout=500"]);
    expect(o.timeoutSeconds).toBe(0);
    expect(o.logFormat).toBe("json");
    expect(o.printEtcdFlags).toBe(true);
    expect(o.retryRevoked).toBe(true);
  });

  it("takes the token from a file or JOIN_BROKER_TOKEN, and the broker from JOIN_BROKER_URL", () => {
    const dir = mkdtempSync(join(tmpdir(), "agent-options-"));
    writeFileSync(join(dir, "token"), "jbe_fromfile\n");
    const withoutToken = REQUIRED.filter((a, i) => a !== "--token" && REQUIRED[i - 1] !== "--token");
    expect(options([...withoutToken, "--token-file", join(dir, "token")]).token).toBe("jbe_fromfile");
    expect(options(withoutToken, { JOIN_BROKER_TOKEN: "jbe_fromenv" }).token).toBe("jbe_fromenv");
    const withoutBroker = REQUIRED.filter((a, i) => a !== "--broker" && REQUIRED[i - 1] !== "--broker");
    expect(options(withoutBroker, { JOIN_BROKER_URL: "http://127.0.0.1:8787" }).brokerUrl).toBe("http://127.0.0.1:8787");
    expect(usageError([...REQUIRED, "--token-file", join(dir, "token")])).toContain("not both");
    expect(usageError(withoutToken)).toBe("an enrollment token is required (--token, --token-file or JOIN_BROKER_TOKEN)");
    // The flag, then the file, then the environment: a file wins over JOIN_BROKER_TOKEN.
    expect(options([...withoutToken, "--token-file", join(dir, "token")], { JOIN_BROKER_TOKEN: "jbe_fromenv" }).token).toBe("jbe_fromfile");
    expect(options(REQUIRED, { JOIN_BROKER_TOKEN: "jbe_fromenv" }).token).toBe("jbe_abc");
    writeFileSync(join(dir, "empty"), "\n");
    expect(usageError([...withoutToken, "--token-file", join(dir, "empty")])).toBe(`--token-file ${join(dir, "empty")} is empty`);
    expect(usageError([...withoutToken, "--token", "jbe abc"])).toContain("the enrollment token may use only A-Z a-z 0-9");
  });

  it("refuses what etcd or the broker would refuse later", () => {
    const set = (flag: string, value: string) => REQUIRED.map((a, i) => (REQUIRED[i - 1] === flag ? value : a));
    expect(usageError(set("--cluster", "Prod"))).toContain("not a valid cluster name");
    expect(usageError(set("--node", "ctrl_1!"))).toContain("not a valid node name");
    expect(usageError(set("--node", "root"))).toContain('node name "root" is reserved');
    expect(usageError(set("--node", "KUBE-APISERVER"))).toContain("is reserved");
    expect(usageError(set("--node", "root"))).toMatch(/^--node: node name "root" is reserved/);
    expect(usageError(set("--peer-url", "https://10.0.0.4"))).toContain("must name a port");
    expect(usageError(set("--peer-url", "https://10.0.0.4:2380/path"))).toContain("must not have a path");
    // The broker's and the join API's strict parser: other spellings of an address are refused here already.
    expect(usageError(set("--peer-url", "https://010.0.0.4:2380"))).toContain("IPv4");
    expect(usageError(set("--peer-url", "https://167772164:2380"))).toContain("IPv4");
    expect(usageError(set("--peer-url", "https://10.0.0.4:02380"))).toContain("without leading zeros");
    expect(usageError(set("--peer-url", "https:/10.0.0.4:2380"))).toContain("absolute URL");
    expect(usageError(set("--join-api", "ftp://x"))).toContain("http or https");
    expect(usageError([...REQUIRED, "--etcd-arg=--data-dir=/x"])).toContain("may not set --data-dir");
    expect(usageError([...REQUIRED, "--etcd-arg=heartbeat"])).toContain("not an etcd flag");
    expect(usageError([...REQUIRED, "--timeout", "soon"])).toContain("--timeout");
    expect(usageError([...REQUIRED, "--log-format", "xml"])).toContain("text or json");
    expect(usageError([...REQUIRED, "--frobnicate"])).toContain("frobnicate");
    expect(usageError(REQUIRED.slice(2))).toBe("--broker URL is required (or JOIN_BROKER_URL)");
  });

  it("names every missing flag at once", () => {
    expect(usageError([], {})).toBe(
      "--broker URL (or JOIN_BROKER_URL), --cluster NAME, an enrollment token (--token, --token-file or JOIN_BROKER_TOKEN), --peer-url URL, --join-api URL and --state-dir DIR are required",
    );
    expect(usageError(["--cluster", "c1", "--node", "n1"], { JOIN_BROKER_URL: "http://b", JOIN_BROKER_TOKEN: "jbe_x" })).toBe(
      "--peer-url URL, --join-api URL and --state-dir DIR are required",
    );
    // Gate mode needs no --join-api.
    expect(
      usageError(["--cluster", "c1", "--exec", "true", "--etcd", "http://127.0.0.1:2379"], { JOIN_BROKER_URL: "http://b", JOIN_BROKER_TOKEN: "jbe_x" }),
    ).toBe("--peer-url URL and --state-dir DIR are required");
  });

  it("answers --help before checking anything else", () => {
    expect(parseJoin(["--help"], {})).toBeNull();
    expect(parseJoin(["-h", "--cluster", "Bad!"], {})).toBeNull();
    // A bad value in the environment too.
    expect(parseJoin(["--help"], { JOIN_BROKER_URL: "not a url" })).toBeNull();
  });
});

describe("gate mode flags", () => {
  const GATE = REQUIRED.filter((_, i) => REQUIRED[i] !== "--join-api" && REQUIRED[i - 1] !== "--join-api");

  it("takes --exec and --etcd instead of --join-api, asking the client URL by default", () => {
    const o = options([...GATE, "--exec", "kubeadm join", "--client-url", "https://10.0.0.4:2379"]);
    expect(o).toMatchObject({ exec: "kubeadm join", joinApiUrl: "", etcdEndpoints: ["https://10.0.0.4:2379"], etcdTls: null, service: false });
    expect(options([...GATE, "--exec", "x", "--etcd", "http://10.0.0.2:2379/, http://10.0.0.3:2379", "--service"])).toMatchObject({
      etcdEndpoints: ["http://10.0.0.2:2379", "http://10.0.0.3:2379"],
      service: true,
    });
  });

  it("refuses flags that contradict gate mode, and gate flags without it", () => {
    // A join API may be named in gate mode: the installer is told where it is.
    expect(options([...GATE, "--exec", "x", "--join-api", "https://10.0.0.2:9443"]).joinApiUrl).toBe("https://10.0.0.2:9443");
    expect(usageError([...GATE, "--exec", "x", "--join-api", "not a url"])).toMatch(/--join-api/);
    expect(usageError([...GATE, "--exec", "x", "--etcd-bin", "/usr/bin/etcd"])).toMatch(/--etcd-bin does not go with --exec/);
    expect(usageError([...GATE, "--exec", " "])).toMatch(/--exec needs a command/);
    expect(usageError([...REQUIRED, "--service"])).toMatch(/--service is for gate mode/);
    expect(usageError([...GATE, "--exec", "x", "--etcd", "ftp://x:1"])).toMatch(/--etcd/);
    expect(usageError(GATE)).toBe("--join-api URL is required");
  });

  it("takes the clean-up command, the removal timeout, the quorum rescue and etcd's server name", () => {
    expect(options([...GATE, "--exec", "x"])).toMatchObject({ cleanup: null, removalTimeoutSeconds: 120, rescue: null });
    const o = options([
      ...GATE,
      "--exec",
      "k0s controller",
      "--cleanup",
      "rm -rf /var/lib/k0s/pki /var/lib/k0s/etcd",
      "--removal-timeout",
      "30",
      "--rescue-etcd",
      "/var/lib/k0s/bin/etcd",
      "--rescue-pki",
      "/var/lib/k0s/pki/etcd",
      "--etcd-cacert",
      "/etc/ca.crt",
      "--etcd-server-name",
      "localhost",
    ]);
    expect(o).toMatchObject({
      cleanup: "rm -rf /var/lib/k0s/pki /var/lib/k0s/etcd",
      removalTimeoutSeconds: 30,
      rescue: { etcdBin: "/var/lib/k0s/bin/etcd", pkiDir: "/var/lib/k0s/pki/etcd" },
      etcdTls: { ca: "/etc/ca.crt", serverName: "localhost" },
    });
    // A value is read as it is parsed: a good one, refused for want of --exec.
    for (const flag of ["--cleanup", "--removal-timeout", "--rescue-etcd", "--rescue-pki"])
      expect(usageError([...REQUIRED, flag, "30"]), flag).toMatch(new RegExp(`^${flag} is for gate mode`));
    expect(usageError([...REQUIRED, "--removal-timeout", "x"])).toMatch(/^--removal-timeout must be a whole number/);
    expect(usageError([...GATE, "--exec", "x", "--cleanup", " "])).toMatch(/--cleanup needs a command/);
    for (const bad of ["0", "1.5", "soon"])
      expect(usageError([...GATE, "--exec", "x", "--removal-timeout", bad]), bad).toMatch(/--removal-timeout .* whole number of seconds, at least 1/);
    expect(usageError([...GATE, "--exec", "x", "--rescue-etcd", "/bin/etcd"])).toMatch(/--rescue-etcd with an https peer URL needs --rescue-pki DIR/);
    expect(usageError([...GATE, "--exec", "x", "--rescue-pki", "/etc/pki"])).toMatch(/--rescue-pki goes with --rescue-etcd/);
    const plain = GATE.map((a) => (a === "https://10.0.0.4:2380/" ? "http://10.0.0.4:2380" : a));
    expect(options([...plain, "--exec", "x", "--rescue-etcd", "/bin/etcd"]).rescue).toEqual({ etcdBin: "/bin/etcd", pkiDir: null });
    expect(usageError([...GATE, "--exec", "x", "--etcd-server-name", "https://localhost"])).toMatch(/--etcd-server-name .* is not a DNS name or an IP address/);
  });

  it("takes --etcd-server-name as a DNS name or an address, and refuses anything else", () => {
    expect(options([...GATE, "--exec", "x", "--etcd-server-name", "localhost"]).etcdTls).toEqual({ serverName: "localhost" });
    expect(options([...GATE, "--exec", "x", "--etcd-server-name", "127.0.0.1"]).etcdTls).toEqual({ serverName: "127.0.0.1" });
    expect(options([...GATE, "--exec", "x", "--etcd-server-name", "::1"]).etcdTls).toEqual({ serverName: "::1" });
    for (const bad of ["https://localhost", "local host", "-x", "a..b", "a_b.example"]) {
      expect(usageError([...GATE, "--exec", "x", `--etcd-server-name=${bad}`]), bad).toBe(
        `--etcd-server-name ${JSON.stringify(bad)} is not a DNS name or an IP address`,
      );
    }
  });

  it("takes --etcd in the agent's own mode too: the other controllers, asked before a bootstrap", () => {
    expect(options([...REQUIRED, "--etcd", "http://10.0.0.2:2379,http://10.0.0.3:2379"])).toMatchObject({
      exec: null,
      controllers: ["http://10.0.0.2:2379", "http://10.0.0.3:2379"],
    });
    expect(options(REQUIRED).controllers).toEqual([]);
    expect(usageError([...REQUIRED, "--etcd", "ftp://x:1"])).toMatch(/--etcd/);
  });

  it("reads etcd's TLS files, cert and key together", () => {
    const dir = mkdtempSync(join(tmpdir(), "jb-tls-"));
    for (const f of ["ca.crt", "c.crt", "c.key"]) writeFileSync(join(dir, f), "x");
    const o = options([...GATE, "--exec", "x", "--etcd-cacert", join(dir, "ca.crt"), "--etcd-cert", join(dir, "c.crt"), "--etcd-key", join(dir, "c.key")]);
    expect(o.etcdTls).toEqual({ ca: join(dir, "ca.crt"), cert: join(dir, "c.crt"), key: join(dir, "c.key") });
    expect(usageError([...GATE, "--exec", "x", "--etcd-cert", join(dir, "c.crt")])).toMatch(/go together/);
    // Files the installer writes while it joins need not exist yet.
    expect(options([...GATE, "--exec", "x", "--etcd-cacert", join(dir, "later.crt")]).etcdTls).toEqual({ ca: join(dir, "later.crt") });
  });
});

describe("--pki-dir", () => {
  it("means https: the client URL defaults to https, and plain URLs are refused", () => {
    const o = options([...REQUIRED, "--pki-dir", "/etc/etcd/pki"]);
    expect(o.pkiDir).toBe("/etc/etcd/pki");
    expect(o.clientURL).toBe("https://127.0.0.1:2379");
    expect(usageError([...REQUIRED, "--pki-dir", "/p", "--client-url", "http://127.0.0.1:2379"])).toContain(
      "--client-url http://127.0.0.1:2379 must be an https:// URL",
    );
    const plainPeer = REQUIRED.map((a) => (a === "https://10.0.0.4:2380/" ? "http://10.0.0.4:2380" : a));
    expect(usageError([...plainPeer, "--pki-dir", "/p"])).toContain("--peer-url");
  });

  it("is for its own mode: gate mode's installer brings its own certificates", () => {
    expect(usageError([...REQUIRED, "--pki-dir", "/p", "--exec", "kubeadm join"])).toContain("--pki-dir does not go with --exec");
  });

  it("asks for kube-apiserver's client certificate with --apiserver-etcd-client, only with it", () => {
    expect(options([...REQUIRED, "--pki-dir", "/p"]).apiServerClient).toBe(false);
    expect(options([...REQUIRED, "--pki-dir", "/p", "--apiserver-etcd-client"]).apiServerClient).toBe(true);
    expect(usageError([...REQUIRED, "--apiserver-etcd-client"])).toBe(
      "--apiserver-etcd-client goes with --pki-dir: the certificate is signed like the node's own, into that directory",
    );
    expect(usageError([...REQUIRED, "--apiserver-etcd-client=yes"])).toBe("--apiserver-etcd-client takes no value");
  });

  it("leaves etcd's TLS flags to the agent", () => {
    expect(usageError([...REQUIRED, "--pki-dir", "/p", "--etcd-arg=--cert-file=/x"])).toContain("may not set --cert-file");
    // The revocation list too: the agent keeps DIR/crl.der current and points etcd at it.
    expect(usageError([...REQUIRED, "--pki-dir", "/p", "--etcd-arg=--client-crl-file=/x"])).toContain("may not set --client-crl-file");
    expect(usageError([...REQUIRED, "--pki-dir", "/p", "--etcd-arg=--peer-crl-file=/x"])).toContain("may not set --peer-crl-file");
    // Without it, an operator's own TLS flags pass through.
    expect(options([...REQUIRED, "--etcd-arg=--cert-file=/x"]).etcdArgs).toEqual(["--cert-file=/x"]);
  });
});
