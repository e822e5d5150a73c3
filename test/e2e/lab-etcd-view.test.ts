/**
 * etcd judges a membership add by the peer connections of the member asked, not the leader's:
 * three voters on lab hosts; one follower's etcd restarts while cut from the other follower. That
 * follower then refuses every add as "unhealthy cluster" while the leader takes it, and the join
 * API's gateway (src/node/etcd/gateway.ts), asked with that follower first, takes the add to the
 * next member instead of answering "unhealthy" for as long as the cut lasts.
 */
import { mkdtempSync, openSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, it } from "vitest";
import { EtcdGateway } from "../../src/node/etcd/gateway.ts";
import { Lab, labSkipReason } from "../lab/lab.ts";
import { etcdBinary } from "../support/etcd.ts";

const skip = await labSkipReason();

/** Polls `check` every 250 ms until it returns a value, or throws after `ms`. */
async function eventually<T>(what: string, ms: number, check: () => Promise<T | null>): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check().catch(() => null);
    if (value !== null) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms / 1000} s waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

it.skipIf(skip)(
  "a follower restarted while cut from the other follower refuses every add as 'unhealthy cluster'; the leader takes it, and the gateway goes on to it",
  async () => {
    const bin = await etcdBinary();
    const lab = await Lab.create();
    const dir = mkdtempSync(join(tmpdir(), "join-broker-etcd-view-"));
    try {
      const names = ["v1", "v2", "v3"];
      for (const n of names) lab.addHost(n);
      const peer = (n: string) => `http://${lab.host(n).ip}:2380`;
      const client = (n: string) => `http://${lab.host(n).ip}:2379`;
      const initial = names.map((n) => `${n}=${peer(n)}`).join(",");
      const start = (n: string) => {
        const log = openSync(join(dir, `${n}.log`), "a");
        return lab.spawn(
          n,
          bin,
          [
            `--name=${n}`,
            `--data-dir=${join(dir, n)}`,
            `--listen-peer-urls=${peer(n)}`,
            `--initial-advertise-peer-urls=${peer(n)}`,
            `--listen-client-urls=${client(n)}`,
            `--advertise-client-urls=${client(n)}`,
            `--initial-cluster=${initial}`,
            "--initial-cluster-state=new",
            "--initial-cluster-token=etcd-view",
          ],
          { stdio: ["ignore", log, log], detached: true },
        );
      };
      const procs = new Map(names.map((n) => [n, start(n)]));
      const url = Object.fromEntries(await Promise.all(names.map(async (n) => [n, await lab.reach(client(n))] as const)));
      const gateway = (...hosts: string[]) =>
        new EtcdGateway(
          hosts.map((h) => url[h]!),
          { timeoutMs: 3_000 },
        );

      // Which member leads; the other two are followers.
      const leaderId = await eventually("a leader", 60_000, async () => {
        const s = await gateway(names[0]!).status();
        return s.ok && s.value.leader && s.value.leader !== "0" ? s.value.leader : null;
      });
      const list = await gateway(...names).memberList();
      if (!list.ok) throw new Error(list.error.message);
      const nameOf = new Map(list.value.members.map((m) => [m.id, m.name]));
      const leader = nameOf.get(leaderId)!;
      const [cut, other] = names.filter((n) => n !== leader) as [string, string];

      // A probe add whose answer timed out may still have gone through: each try removes every
      // probe learner first, so that etcd's one-learner limit never turns the next try away.
      const removeProbes = async () => {
        const members = await gateway(leader).memberList();
        if (!members.ok) return;
        for (const m of members.value.members)
          if (m.isLearner && m.peerURLs.some((u) => u.startsWith("http://10.77.254."))) await gateway(leader).memberRemove(m.id);
      };

      // First the leader takes an add (a learner, removed again): the cluster has been connected
      // for etcd's 5 s, so what follows is the cut's doing, not a young cluster's.
      let tries = 0;
      await eventually("the leader to take an add", 60_000, async () => {
        await removeProbes();
        const r = await gateway(leader).memberAdd([`http://10.77.254.${++tries}:2380`], { learner: true });
        if (!r.ok) return null;
        const removed = await gateway(leader).memberRemove(r.value.member.id);
        if (!removed.ok) throw new Error(`removing the probe learner: ${removed.error.message}`);
        return true;
      });

      // The cut follower's etcd restarts while it cannot reach the other follower (both ways): it
      // comes back through the leader and never counts the other one as connected.
      const killed = procs.get(cut)!;
      killed.kill("SIGKILL");
      await new Promise((r) => (killed.exitCode !== null || killed.signalCode !== null ? r(null) : killed.once("exit", r)));
      lab.partition([cut], [other]);
      procs.set(cut, start(cut));

      // From its own view it refuses every add (a fresh peer URL per try; one it takes before it
      // is up to date is removed again through the leader).
      const refusal = await eventually(`${cut} to refuse an add`, 60_000, async () => {
        await removeProbes();
        const r = await gateway(cut).memberAdd([`http://10.77.254.${++tries}:2380`], { learner: true });
        if (r.ok) await gateway(leader).memberRemove(r.value.member.id);
        // Not up yet ("unavailable") is not the refusal looked for.
        return !r.ok && r.error.kind === "unhealthy_cluster" ? r.error : null;
      });
      expect(refusal.message).toMatch(/unhealthy cluster/);

      // Asked in the order cut follower, leader, the gateway takes the add to the leader (once the
      // leader has had the restarted member back for 5 s). Answering the cut follower's refusal
      // instead, it would never add.
      await removeProbes();
      const added = await eventually("an add through the gateway", 60_000, async () => {
        const r = await gateway(cut, leader).memberAdd(["http://10.77.254.201:2380"], { learner: true });
        if (!r.ok && r.error.kind !== "unhealthy_cluster") throw new Error(r.error.message);
        return r.ok ? r : null;
      });
      expect(added.endpoint).toBe(url[leader]);
      // The cut follower still refuses on its own: the add went past it, not through it.
      const still = await gateway(cut).memberAdd(["http://10.77.254.202:2380"], { learner: true });
      expect(still.ok ? "added" : still.error.kind).toBe("unhealthy_cluster");
      const after = await gateway(leader).memberList();
      expect(after.ok && after.value.members.filter((m) => m.isLearner).map((m) => m.peerURLs[0])).toEqual(["http://10.77.254.201:2380"]);
    } finally {
      lab.destroy();
      rmSync(dir, { recursive: true, force: true });
    }
  },
  180_000,
);
