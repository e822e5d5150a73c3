/**
 * Unmodified kubeadm and kube-apiserver on lab hosts, their static pods run by the kubelet
 * stand-in (test/lab/kubelet-standin.ts): `kubeadm init` on cp-1, then `kubeadm join
 * --control-plane` on cp-2; etcd ends with two started voters of one cluster and cp-2's own
 * kube-apiserver answers /readyz. Skipped unless the lab can run and kubeadm, kube-apiserver and
 * their etcd are already built (`node scripts/kube.mjs list` builds them; this file never does).
 * What kubeadm printed and each pod's output stay in test-results/lab-kubeadm/.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { kubeRequest, readKubeconfig, type KubeCredentials } from "../lab/kube-client.ts";
import { kubeadmInit, kubeadmJoin, kubeBinaries, prepareKubeHost, type KubeadmHost, type KubeBinaries, type KubeadmRun } from "../lab/kubeadm.ts";
import { KubeletStandIn } from "../lab/kubelet-standin.ts";
import { Lab, labSkipReason } from "../lab/lab.ts";

const labSkip = await labSkipReason();
const found = kubeBinaries();
const skip = labSkip ?? (typeof found === "string" ? found : null);
if (skip && !labSkip) console.warn(`[lab-kubeadm] skipped: ${skip}`);

const OUT = resolve(import.meta.dirname, "../../test-results/lab-kubeadm");
let lab: Lab;
let bins: KubeBinaries;
const kubelets = new Map<string, KubeletStandIn>();
const hosts = new Map<string, KubeadmHost>();

function addKubeHost(name: string): KubeadmHost {
  const h = lab.addHost(name);
  prepareKubeHost(lab, name);
  const first = hosts.values().next().value?.address ?? h.ip;
  const kh: KubeadmHost = { host: name, nodeName: name, address: h.ip, controlPlaneEndpoint: `${first}:6443` };
  hosts.set(name, kh);
  const binaries = { etcd: bins.etcd, "kube-apiserver": bins.kubeApiserver };
  kubelets.set(name, new KubeletStandIn({ lab, host: name, nodeName: name, binaries, logDir: OUT, onEvent: (line) => writeFileSync(join(OUT, "kubelet-standin.log"), `${new Date().toISOString()} ${line}\n`, { flag: "a" }) }));
  return kh;
}

function keep(name: string, run: KubeadmRun): void {
  writeFileSync(join(OUT, `${name}.log`), `exit ${run.code} after ${run.ms} ms\n${run.output}`);
}

/** Waits for what is eventually true; the last value and problem go into the error. */
async function eventually<T>(what: string, attempt: () => Promise<T | null>, budgetMs: number): Promise<T> {
  const deadline = Date.now() + budgetMs;
  let last: unknown = null;
  for (;;) {
    try {
      const v = await attempt();
      if (v !== null) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`${what}: not within ${budgetMs / 1000} s (last: ${String(last)})`);
    await new Promise((r) => setTimeout(r, 1_000));
  }
}

/** The API server's client certificate for etcd on `host`, aimed at `host`'s etcd. */
function etcdCredentials(host: string): KubeCredentials {
  const pki = join(lab.host(host).mounts.get("/etc/kubernetes")!, "pki");
  const read = (f: string) => readFileSync(join(pki, f));
  return { server: `https://${lab.host(host).ip}:2379`, ca: read("etcd/ca.crt"), cert: read("apiserver-etcd-client.crt"), key: read("apiserver-etcd-client.key") };
}

interface MemberList {
  header: { cluster_id: string };
  members: { ID: string; name?: string; clientURLs?: string[]; isLearner?: boolean }[];
}

beforeAll(async () => {
  if (skip) return;
  bins = found as KubeBinaries;
  rmSync(OUT, { recursive: true, force: true });
  mkdirSync(OUT, { recursive: true });
  lab = await Lab.create();
}, 60_000);

afterAll(async () => {
  await Promise.all([...kubelets.values()].map((k) => k.close()));
  lab?.destroy();
}, 60_000);

it.skipIf(skip)(
  "kubeadm init on cp-1, kubeadm join --control-plane on cp-2: two started etcd voters of one cluster, cp-2's API server ready",
  async () => {
    const cp1 = addKubeHost("cp-1");
    const cp2 = addKubeHost("cp-2");

    const init = await kubeadmInit(lab, bins, cp1);
    keep("kubeadm-init-cp-1", init);
    expect(init.code, init.output).toBe(0);
    console.log(`[lab-kubeadm] kubeadm init on cp-1: ${init.ms} ms`);

    const joined = await kubeadmJoin(lab, bins, cp2, "cp-1");
    keep("kubeadm-join-cp-2", joined);
    expect(joined.code, joined.output).toBe(0);
    console.log(`[lab-kubeadm] kubeadm join --control-plane on cp-2: ${joined.ms} ms`);

    // Every member's own view: both started (named, with client URLs), both voters, one cluster.
    const views = await eventually(
      "two started voters of one cluster in both members' views",
      async () => {
        const lists: MemberList[] = [];
        for (const host of ["cp-1", "cp-2"]) {
          const answer = await kubeRequest(lab, etcdCredentials(host), "POST", "/v3/cluster/member/list", {});
          if (answer.status !== 200) return null;
          lists.push(JSON.parse(answer.body) as MemberList);
        }
        const ok = lists.every((l) => l.members.length === 2 && l.members.every((m) => m.name && m.clientURLs?.length && !m.isLearner));
        return ok ? lists : null;
      },
      60_000,
    );
    expect(new Set(views.map((l) => l.header.cluster_id)).size).toBe(1);
    expect(views[0]!.members.map((m) => m.name).sort()).toEqual(["cp-1", "cp-2"]);

    // cp-2's own API server (on its own etcd member), with cp-2's admin certificate.
    const admin2 = { ...readKubeconfig(join(lab.host("cp-2").mounts.get("/etc/kubernetes")!, "admin.conf")), server: `https://${cp2.address}:6443` };
    const ready = await eventually("cp-2's kube-apiserver /readyz", async () => {
      const r = await kubeRequest(lab, admin2, "GET", "/readyz");
      return r.status === 200 ? r.body : null;
    }, 120_000);
    expect(ready).toBe("ok");

    // The mirror pods kubeadm's join found etcd by: one per node, labelled as kubeadm looks for them.
    const pods = await kubeRequest(lab, admin2, "GET", "/api/v1/namespaces/kube-system/pods?labelSelector=component%3Detcd,tier%3Dcontrol-plane");
    const names = (JSON.parse(pods.body) as { items: { metadata: { name: string; annotations: Record<string, string> } }[] }).items.map((p) => p.metadata.name).sort();
    expect(names).toEqual(["etcd-cp-1", "etcd-cp-2"]);
  },
  420_000,
);
