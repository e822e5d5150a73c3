/**
 * The real kube-apiserver (the pinned release, built by scripts/kube.mjs) on etcd run by the
 * agent with TLS and auth on: a node that joined with --apiserver-etcd-client gets the client
 * certificate kube-apiserver reaches etcd with (etcd user kube-apiserver), and kube-apiserver
 * serves with it (ready, a namespace created and read back, stored under /registry/), while that
 * certificate still cannot change the membership or read the join API's records.
 *
 * Needs kube-apiserver already built (`npm test` builds it in the background and runs this file
 * after it, with the kubeadm tests); under CI=true its absence is a failure, elsewhere a skip.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { request } from "node:https";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { pkiFiles } from "../../src/node/pki/pki-dir.ts";
import { certificateFacts } from "../../src/node/pki/x509.ts";
import { cachedKubePath } from "../../scripts/kube.mjs";
import { ClusterHarness } from "../support/cluster.ts";
import { ensureTool, freePorts } from "../support/etcd.ts";
import { e2eSeed } from "../support/seeded.ts";
import { P256_NEW_KEY } from "../support/operator-cas.ts";

const apiserver = cachedKubePath("kube-apiserver");
const skip = apiserver ? null : "kube-apiserver is not built (node scripts/kube.mjs list)";
if (skip && process.env.CI === "true") throw new Error(`CI=true and the kube-apiserver test cannot run: ${skip}`);
if (skip) console.warn(`[apiserver-etcd] skipped: ${skip}`);

const seed = e2eSeed("apiserver-etcd");
let h: ClusterHarness;
let proc: ChildProcess | null = null;
let output = "";

beforeAll(async () => {
  if (skip) return;
  h = await ClusterHarness.start({ scenario: "apiserver-etcd", seed, nodes: ["ctrl-0", "ctrl-1"], broker: { runtime: "serve" } });
  h.startAgent("ctrl-0", { args: [...h.agentArgs(h.node("ctrl-0")), "--apiserver-etcd-client"] });
  await h.waitFor("ctrl-0 to bootstrap", () => h.joined("ctrl-0"), 120_000);
  h.startAgent("ctrl-1", { args: [...h.agentArgs(h.node("ctrl-1")), "--apiserver-etcd-client"] });
  await h.waitFor("ctrl-1 to join", () => h.joined("ctrl-1"), 120_000);
}, 300_000);

afterAll(async () => {
  if (proc?.pid && proc.exitCode === null && proc.signalCode === null) {
    const exited = new Promise((r) => proc!.once("exit", r));
    proc.kill("SIGTERM");
    await exited;
  }
  h?.writeTimeline();
  await h?.cleanup();
});

function run(bin: string, args: string[], env: Record<string, string> = {}): Promise<{ ok: boolean; out: string }> {
  return new Promise((resolve) =>
    execFile(bin, args, { env: { ...process.env, ...env }, timeout: 60_000 }, (e, out, err) => resolve({ ok: e === null, out: `${out}${err}` })),
  );
}

/** One HTTPS call to kube-apiserver with the admin's client certificate (system:masters). */
function kube(
  port: number,
  admin: { ca: string; cert: string; key: string },
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = request(
      {
        host: "127.0.0.1",
        port,
        method,
        path,
        ca: readFileSync(admin.ca),
        cert: readFileSync(admin.cert),
        key: readFileSync(admin.key),
        rejectUnauthorized: false,
        headers: payload ? { "content-type": "application/json" } : {},
      },
      (res) => {
        let text = "";
        res.on("data", (c: Buffer) => (text += c.toString()));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on("error", (e) => resolve({ status: 0, body: e.message }));
    req.setTimeout(10_000, () => req.destroy(new Error("timed out")));
    req.end(payload);
  });
}

it.skipIf(skip)(
  "kube-apiserver serves on the agent's etcd with the kube-apiserver client certificate, which cannot change the membership",
  async () => {
    const node = h.node("ctrl-1");
    const files = pkiFiles(node.pkiDir);
    const client = { ca: files.ca, cert: files.apiServerCert, key: files.apiServerKey };
    expect(certificateFacts(readFileSync(client.cert, "utf8")).commonName).toBe("kube-apiserver");

    // What etcd lets it do: keys, yes; the membership and the join API's records, no.
    const beside = join(dirname(h.etcdBin), "etcdctl");
    const etcdctl = existsSync(beside) ? beside : await ensureTool("etcdctl");
    const ctl = (args: string[]) =>
      run(etcdctl, [`--endpoints=${node.clientURL}`, `--cacert=${client.ca}`, `--cert=${client.cert}`, `--key=${client.key}`, ...args], { ETCDCTL_API: "3" });
    expect((await ctl(["put", "/registry/e2e-probe", "1"])).ok).toBe(true);
    const [free] = await freePorts(1);
    const add = await ctl(["member", "add", "evil", "--learner", `--peer-urls=https://127.0.0.1:${free}`]);
    expect(add.ok, add.out).toBe(false);
    expect(add.out).toMatch(/permission denied/);
    const records = await ctl(["get", "/join-broker/", "--prefix"]);
    expect(records.ok, records.out).toBe(false);
    expect(records.out).toMatch(/permission denied/);

    // The admin's client certificate for kube-apiserver (its own CA, system:masters), and its service account keys: openssl.
    const dir = mkdtempSync(join(tmpdir(), "join-broker-apiserver-"));
    const openssl = await ensureTool("openssl");
    const o = (args: string[]) => run(openssl, args).then((r) => expect(r.ok, r.out).toBe(true));
    await o(["req", "-x509", ...P256_NEW_KEY, "-keyout", join(dir, "kube-ca.key"), "-out", join(dir, "kube-ca.crt"), "-subj", "/CN=kube CA", "-days", "1"]);
    await o(["req", ...P256_NEW_KEY, "-keyout", join(dir, "admin.key"), "-out", join(dir, "admin.csr"), "-subj", "/O=system:masters/CN=admin"]);
    writeFileSync(join(dir, "admin.ext"), "extendedKeyUsage=clientAuth\n");
    await o([
      "x509",
      "-req",
      "-in",
      join(dir, "admin.csr"),
      "-CA",
      join(dir, "kube-ca.crt"),
      "-CAkey",
      join(dir, "kube-ca.key"),
      "-CAcreateserial",
      "-days",
      "1",
      "-extfile",
      join(dir, "admin.ext"),
      "-out",
      join(dir, "admin.crt"),
    ]);
    await o(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", join(dir, "sa.key")]);
    await o(["pkey", "-in", join(dir, "sa.key"), "-pubout", "-out", join(dir, "sa.pub")]);

    const [port] = await freePorts(1);
    proc = spawn(
      apiserver!,
      [
        `--etcd-servers=${h.nodes.map((n) => n.clientURL).join(",")}`,
        `--etcd-cafile=${client.ca}`,
        `--etcd-certfile=${client.cert}`,
        `--etcd-keyfile=${client.key}`,
        // etcd 3.5.35+ and 3.6.16+ let only root compact: etcd compacts itself (the agent starts it so).
        "--etcd-compaction-interval=0",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        // No kubernetes Service endpoints for a loopback address (kube-apiserver refuses to publish one).
        "--endpoint-reconciler-type=none",
        `--secure-port=${port}`,
        `--cert-dir=${join(dir, "serving")}`,
        `--client-ca-file=${join(dir, "kube-ca.crt")}`,
        "--authorization-mode=RBAC",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        `--service-account-key-file=${join(dir, "sa.pub")}`,
        `--service-account-signing-key-file=${join(dir, "sa.key")}`,
        "--service-cluster-ip-range=10.96.0.0/16",
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    proc.stdout!.on("data", (c: Buffer) => (output = (output + c.toString()).slice(-20_000)));
    proc.stderr!.on("data", (c: Buffer) => (output = (output + c.toString()).slice(-20_000)));
    const admin = { ca: join(dir, "kube-ca.crt"), cert: join(dir, "admin.crt"), key: join(dir, "admin.key") };
    const deadline = Date.now() + 180_000;
    let ready = await kube(port, admin, "GET", "/readyz");
    while (ready.status !== 200) {
      if (Date.now() > deadline || proc.exitCode !== null)
        throw new Error(`kube-apiserver not ready (exit ${proc.exitCode}; ${ready.status} ${ready.body.slice(0, 500)}):\n${output.slice(-4000)}`);
      await new Promise((r) => setTimeout(r, 1_000));
      ready = await kube(port, admin, "GET", "/readyz");
    }
    const created = await kube(port, admin, "POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: "join-broker-e2e" } });
    expect(created.status, created.body).toBe(201);
    const read = await kube(port, admin, "GET", "/api/v1/namespaces/join-broker-e2e");
    expect(read.status, read.body).toBe(200);
    // Where etcd keeps it: under /registry/, read as root.
    const stored = await h.etcd(node.clientURL).get("/registry/namespaces/join-broker-e2e");
    expect(stored.ok && stored.value).toBeTruthy();
    // No etcd permission error in kube-apiserver's log.
    expect(output).not.toMatch(/permission denied/);
  },
  300_000,
);
