/**
 * kubeadm's etcd PKI directory as kubeadm writes it: the real `kubeadm init phase certs etcd-ca`
 * makes /etc/kubernetes/pki/etcd/{ca.crt,ca.key} (here under a directory of the test's own) and
 * `… apiserver-etcd-client` the API server's etcd client certificate. The bootstrap node's
 * --pki-dir is that directory, unchanged; the join API's --pki-dir too, with the API server's
 * client certificate as its --etcd-cert (docs/join-api.md, "kubeadm's and k0s's etcd CA"); a joiner
 * gets its certificates from the join API. Every certificate is judged by Go's crypto/x509.
 *
 * Runs in `npm test`'s kubeadm step, after the background build of kubeadm
 * (`node scripts/kube.mjs list`); this file never builds it. Not built: skipped, a failure under CI=true.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { cachedKubePath, kubePin } from "../../scripts/kube.mjs";
import { pkiFiles } from "../../src/node/pki/pki-dir.ts";
import { goVerify } from "../support/certcheck.ts";
import { ClusterHarness } from "../support/cluster.ts";
import { expectOneHealthyCluster } from "../support/cluster-assertions.ts";
import { e2eSeed } from "../support/seeded.ts";

const kubeadm = cachedKubePath("kubeadm");
const skip = kubeadm ? null : "kubeadm is not built (node scripts/kube.mjs list builds it)";
if (skip && process.env.CI === "true") throw new Error(`CI=true and the kubeadm CA test cannot run: ${skip}`);
if (skip) console.warn(`[kubeadm-ca] skipped: ${skip}`);

const seed = e2eSeed("kubeadm-ca");
let pkiRoot = "";
afterAll(() => {
  if (pkiRoot) rmSync(pkiRoot, { recursive: true, force: true });
});

it.skipIf(skip)(
  "kubeadm's etcd CA directory, unchanged: the bootstrap node signs with it, the join API signs a joiner's and talks to etcd as kube-apiserver does",
  async () => {
    // /etc/kubernetes/pki as kubeadm lays it out, under a directory of the test's own.
    pkiRoot = mkdtempSync(join(tmpdir(), "join-broker-kubeadm-pki-"));
    for (const phase of ["etcd-ca", "apiserver-etcd-client"]) {
      execFileSync(kubeadm!, ["init", "phase", "certs", phase, "--cert-dir", pkiRoot, "--kubernetes-version", `v${kubePin().release}`], {
        stdio: ["ignore", "pipe", "pipe"],
      });
    }
    const etcdDir = join(pkiRoot, "etcd");
    expect(readdirSync(etcdDir).sort()).toEqual(["ca.crt", "ca.key"]);
    expect(readFileSync(join(etcdDir, "ca.key"), "utf8")).toMatch(/^-----BEGIN RSA PRIVATE KEY-----/);
    const before = {
      cert: readFileSync(join(etcdDir, "ca.crt")),
      key: readFileSync(join(etcdDir, "ca.key")),
      mtime: statSync(join(etcdDir, "ca.crt")).mtimeMs,
    };
    const apiserverClient = { ca: join(etcdDir, "ca.crt"), cert: join(pkiRoot, "apiserver-etcd-client.crt"), key: join(pkiRoot, "apiserver-etcd-client.key") };

    const h = await ClusterHarness.start({
      scenario: "kubeadm-ca",
      seed,
      nodes: ["ctrl-0", "ctrl-1"],
      broker: { runtime: "serve" },
      operatorCa: { dir: etcdDir, nodePkiDirs: { "ctrl-0": etcdDir }, joinApiClient: apiserverClient },
    });
    try {
      h.startAgent("ctrl-0");
      await h.waitFor("ctrl-0 to bootstrap on kubeadm's etcd CA", () => h.joined("ctrl-0"), 90_000);
      h.startAgent("ctrl-1");
      await h.waitFor("ctrl-1 to join", () => h.joined("ctrl-1"), 120_000);
      await expectOneHealthyCluster(h, ["ctrl-0", "ctrl-1"]);
      expect(h.current("ctrl-0")!.events.find((e) => e.step === "pki")?.msg).toMatch(
        new RegExp(`^the etcd CA in ${etcdDir} \\(CN=etcd-ca; RSA 2048, signs with sha256WithRSAEncryption; valid until `),
      );

      // The bootstrap node's certificates sit beside kubeadm's CA, in kubeadm's file names.
      expect(readdirSync(etcdDir).sort()).toEqual(["ca.crt", "ca.key", "crl.der", "peer.crt", "peer.key", "server.crt", "server.key"]);
      const caFile = join(etcdDir, "ca.crt");
      for (const node of ["ctrl-0", "ctrl-1"]) {
        const files = pkiFiles(h.node(node).pkiDir);
        const verdict = goVerify(caFile, [files.peerCert, files.serverCert], { hosts: ["127.0.0.1"] });
        expect(verdict.output, node).toMatch(/^ok .*issued by CN=etcd-ca \(SHA256-RSA\)/);
        expect(verdict.ok).toBe(true);
      }
      // kube-apiserver's client certificate, made by kubeadm: etcd took it from the join API (ctrl-1 was added with it).
      expect(goVerify(caFile, [apiserverClient.cert], { usage: "client" }).output).toMatch(/^ok .*CN=kube-apiserver-etcd-client/);
      expect(h.joinApi.output()).toMatch(/added learner [0-9a-f]+ for node ctrl-1 /);
      // Once the bootstrap node turned etcd's auth on, the gateway refused that certificate (it names a
      // user etcd does not have): the join API went on with its own, which names none.
      expect(h.joinApi.output()).toMatch(/refuses \S+apiserver-etcd-client\.crt, which names a user .*: using a client certificate of this join API's own/);
      // kubeadm's API server keeps its certificate: etcd's auth knows its name (kube-apiserver-etcd-client)
      // as an API server's (keys yes, membership no), through gRPC as kube-apiserver talks to etcd.
      const etcdctl = existsSync(join(dirname(h.etcdBin), "etcdctl")) ? join(dirname(h.etcdBin), "etcdctl") : "etcdctl";
      const ctl = (args: string[]) => {
        try {
          return {
            ok: true,
            out: execFileSync(
              etcdctl,
              [
                `--endpoints=${h.node("ctrl-1").clientURL}`,
                `--cacert=${apiserverClient.ca}`,
                `--cert=${apiserverClient.cert}`,
                `--key=${apiserverClient.key}`,
                ...args,
              ],
              { env: { ...process.env, ETCDCTL_API: "3" }, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] },
            ),
          };
        } catch (e) {
          return { ok: false, out: `${(e as { stdout?: string }).stdout ?? ""}${(e as { stderr?: string }).stderr ?? ""}` };
        }
      };
      expect(ctl(["put", "/registry/kubeadm-probe", "1"]).ok).toBe(true);
      const add = ctl(["member", "add", "evil", "--learner", "--peer-urls=https://127.0.0.1:1"]);
      expect(add.ok, add.out).toBe(false);
      expect(add.out).toMatch(/permission denied/);
      // kubeadm's CA as kubeadm wrote it.
      expect(readFileSync(join(etcdDir, "ca.crt")).equals(before.cert)).toBe(true);
      expect(readFileSync(join(etcdDir, "ca.key")).equals(before.key)).toBe(true);
      expect(statSync(join(etcdDir, "ca.crt")).mtimeMs).toBe(before.mtime);
    } finally {
      h.writeTimeline();
      await h.cleanup();
    }
  },
);
