/**
 * The kubeadm benchmark's pure parts, without a lab: init.yaml's etcd flags for the start-rule
 * arm, its summary (a failed round is not timed; the ratios are to the serial script's median),
 * and what it reads off kubeadm 1.37's output (lines as kubeadm printed them in a benchmark run).
 */
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { addHeldSeconds, summarizeKubeadm, type KubeadmArm, type KubeadmArmRun } from "../../bench/kubeadm-gate.ts";
import { initConfig, type KubeadmHost } from "../lab/kubeadm.ts";

const host: KubeadmHost = { host: "cp-1", nodeName: "cp-1", address: "10.77.0.10", controlPlaneEndpoint: "10.77.0.20:6443" };
const clusterConfiguration = (yaml: string) =>
  parseAllDocuments(yaml)
    .map((d) => d.toJS() as Record<string, unknown>)
    .find((d) => d.kind === "ClusterConfiguration")!;

describe("init.yaml", () => {
  it("gives etcd's extra flags as ClusterConfiguration.etcd.local.extraArgs (v1beta4: a list of name and value)", () => {
    const cluster = clusterConfiguration(initConfig(host, { etcdExtraArgs: { "max-learners": "4" } }));
    expect(cluster.etcd).toEqual({ local: { extraArgs: [{ name: "max-learners", value: "4" }] } });
  });

  it("leaves etcd to kubeadm's defaults without them", () => {
    expect(clusterConfiguration(initConfig(host)).etcd).toBeUndefined();
  });
});

describe("summarizeKubeadm", () => {
  const run = (arm: KubeadmArm, round: number, seconds: number | null): KubeadmArmRun => ({
    arm,
    round,
    ok: seconds !== null,
    ...(seconds !== null ? { seconds } : { failure: "2 learner(s) left" }),
    maxInFlight: arm === "serial" || arm === "serialized" ? 1 : 4,
    nodes: [],
    checks: { voters: 5, clusterIds: 1, learners: 0, memberCountUnequal: 0, tooManyLearners: 0 },
  });

  it("takes medians over the passed rounds only and divides by the serial script's", () => {
    const s = summarizeKubeadm([
      run("serial", 0, 30),
      run("serialized", 0, 27),
      run("start-rule", 0, 18),
      run("serial", 1, 40),
      run("serialized", 1, 33),
      run("start-rule", 1, null),
      run("serial", 2, 35),
      run("serialized", 2, 30),
      run("start-rule", 2, 21),
    ]);
    expect(s.medians).toEqual({ serial: 35, serialized: 30, "start-rule": 19.5, prepared: null, pipelined: null });
    expect(s.startRuleRatio).toBeCloseTo(19.5 / 35, 3);
    expect(s.serializedRatio).toBeCloseTo(30 / 35, 3);
    expect(s.preparedRatio).toBeNull();
    expect(s.failedRounds).toBe(1);
  });

  it("has no ratio when every round of an arm failed", () => {
    const s = summarizeKubeadm([run("serial", 0, null), run("start-rule", 0, 20)]);
    expect(s.medians.serial).toBeNull();
    expect(s.startRuleRatio).toBeNull();
  });
});

describe("addHeldSeconds", () => {
  const held = [
    "I1207 22:16:32.663906   29888 local.go:155] [etcd] Adding etcd member: https://10.77.92.13:2380",
    'I1207 22:16:32.675217   29888 etcd.go:492] [etcd] Adding etcd member "https://10.77.92.13:2380" as learner',
    "I1207 22:16:32.676287   29888 etcd.go:514] Failed to add etcd member: etcdserver: unhealthy cluster",
    'I1207 22:16:33.166911   29888 etcd.go:492] [etcd] Adding etcd member "https://10.77.92.13:2380" as learner',
    "I1207 22:16:33.167708   29888 etcd.go:514] Failed to add etcd member: etcdserver: unhealthy cluster",
    'I1207 22:16:37.166174   29888 etcd.go:492] [etcd] Adding etcd member "https://10.77.92.13:2380" as learner',
    "[etcd] Announced new etcd member joining to the existing etcd cluster",
    "I1207 22:16:37.169123   29888 local.go:161] Updated etcd member list: [{cp-1 https://10.77.92.10:2380} {cp-4 https://10.77.92.13:2380}]",
  ];

  it("is the time from kubeadm's first add attempt to the one etcd took, when etcd refused earlier ones as an unhealthy cluster", () => {
    expect(addHeldSeconds(held.join("\n"))).toBeCloseTo(37.166174 - 32.675217, 2);
  });

  it("is absent when etcd took the first attempt", () => {
    expect(addHeldSeconds([held[0], held[1], ...held.slice(6)].join("\n"))).toBeUndefined();
  });

  it("counts across midnight", () => {
    const late = held.map((l) => l.replace("22:16:32", "23:59:58").replace("22:16:33", "23:59:59").replace("22:16:37", "00:00:03"));
    expect(addHeldSeconds(late.join("\n"))).toBeCloseTo(3.166174 + 2 - 0.675217, 2);
  });
});
