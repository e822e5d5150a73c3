/**
 * k0s's own join API checks the broker's admission: real k0s 1.28.14 and 1.36.3 with the patch of
 * integrations/k0s/<version>/broker/ (built by `node scripts/k0s.mjs path <version>+broker`), on
 * lab hosts, with docs/k0s.md's unit.
 *
 * - A joiner through the broker joins: its k0s sends the admission its agent received, and the
 *   bootstrap node's `k0s api` logs the admission that let it add the member.
 * - k0s's join token alone (stolen, or a controller started outside the gate) gets neither the
 *   cluster's CA nor an etcd member: 401 `admission_required`; a real `k0s controller` started
 *   with it gets no CA and writes none.
 * - A current admission of another node: 403 `wrong_node` (and `wrong_peer_url` for another peer
 *   URL), as text or as problem+json; a real k0s joining with it is refused at the member add.
 *   Revoked by an admin, that admission is 410 `admission_revoked` even for its own node.
 * - Through all of it etcd's member list does not change, and no answer is a 500.
 *
 * One cluster per version, both versions side by side on labs of their own. Skipped unless the
 * lab can run and the patched k0s, its etcd and kube-apiserver are already built (`npm test`
 * builds them; this file never does); under CI=true, not built is a failure. What k0s and the
 * agents printed stays in test-results/lab-k0s/admission-<version>/.
 */
import type { spawn } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "vitest";
import { hostJoinToken, joinTokenBearer, k0sApiCall } from "../lab/k0s-api.ts";
import { BrokeredK0sLab, disabledComponents, k0sBinaries, startedVoters, type K0sBinaries, type MemberList } from "../lab/k0s-lab.ts";
import { eventually, labSkipReason } from "../lab/lab.ts";
import { k0sVersionsToRun } from "../support/test-plan.mjs";

const labSkip = await labSkipReason();
// The releases of this run: one per k0s step of `npm test` (E2E_K0S_VERSIONS), else both.
const versions = k0sVersionsToRun();
const found = Object.fromEntries(versions.map((v) => [v, k0sBinaries(v, "broker")] as const));
const missing = Object.values(found).filter((f): f is string => typeof f === "string");
if (!labSkip && missing.length && process.env.CI === "true") throw new Error(`CI=true and the k0s admission tests cannot run: ${missing.join("; ")}`);
if (!labSkip && missing.length) console.warn(`[lab-k0s-admission] skipped: ${missing.join("; ")}`);

const HOSTS = ["k0s-1", "k0s-2", "k0s-3"];
/** A node that never runs: the holder of the admission the others try to use. */
const OTHER = { node: "k0s-9", peerURL: "https://10.77.250.9:2380" };

const describeMembers = (list: MemberList | null) =>
  list ? list.members.map((m) => `${m.name || "(unstarted)"} ${m.peerURLs?.join(",")}${m.isLearner ? " learner" : ""}`).join("; ") : "etcd does not answer";
const jti = (jwt: string) => (JSON.parse(Buffer.from(jwt.split(".")[1]!, "base64url").toString("utf8")) as { jti: string }).jti;

for (const version of versions) {
  const bins = found[version] as K0sBinaries | string;
  const skip = labSkip !== null || typeof bins === "string";
  const release = typeof bins === "string" ? `${version} +broker` : bins.release;

  describe.concurrent(`k0s ${release}`, () => {
    it.skipIf(skip)(
      "k0s's join API adds a member only for the admitted node at its peer URL: the joiner through the broker joins; k0s's join token without that admission gets no CA and no member (401, 403, 410), and etcd's member list stays as it was",
      async ({ expect }) => {
        const log = (line: string) => console.log(`[lab-k0s-admission ${version}] ${line}`);
        const b = await BrokeredK0sLab.create(`admission-${version}`, bins as K0sBinaries, HOSTS, { log });
        const rogues: ReturnType<typeof spawn>[] = [];
        try {
          const { h, k } = b;
          const [first, second, outsider] = HOSTS as [string, string, string];
          // What k0s's join API on either controller logged (the units' output, whole).
          const servers = () => b.journal(first) + b.journal(second);

          // 1. Two controllers through the broker with docs/k0s.md's unit: the second joins through the check.
          b.startService(first);
          b.startService(second);
          await eventually(
            `${first} and ${second} joined, two started voters`,
            () =>
              [first, second].every((n) => h.current(n)?.events.some((e) => e.step === "joined")) &&
              startedVoters(k.members(first) ?? { header: { cluster_id: "", member_id: "" }, members: [] }).length === 2
                ? true
                : null,
            600_000,
          );
          // The broker picked who bootstraps; the other joined through the bootstrap node's join API.
          const role = (n: string) => h.current(n)?.events.find((e) => e.step === "exec")?.role;
          const boot = role(first) === "bootstrap" ? first : second;
          const joiner = boot === first ? second : first;
          expect([role(boot), role(joiner)]).toEqual(["bootstrap", "join"]);
          const joinerPeer = h.node(joiner).peerURL;
          expect(b.journal(boot)).toMatch(
            new RegExp(
              `join broker admission check on: etcd members are added only for a node admitted by ${h.broker.url.replace(/[.]/g, "\\.")} for cluster ${h.cluster}`,
            ),
          );
          expect(b.journal(boot)).toMatch(
            new RegExp(`join broker admission adm_\\S+ \\(ticket tkt_\\S+\\) admits ${joiner} at ${joinerPeer.replace(/[.]/g, "\\.")}`),
          );
          const before = k.members(first)!;
          log(`members: ${describeMembers(before)}`);

          const bearer = joinTokenBearer(hostJoinToken(k, outsider));
          const outsiderPeer = h.node(outsider).peerURL;
          const add = (body: { node: string; peerAddress: string }, admission?: string, accept?: string) =>
            k0sApiCall(k, { method: "POST", path: "/v1beta1/etcd/members", bearer, body, ...(admission ? { admission } : {}), ...(accept ? { accept } : {}) });

          // 2. k0s's own token check comes first, unchanged.
          const noToken = await k0sApiCall(k, { method: "POST", path: "/v1beta1/etcd/members", body: { node: outsider, peerAddress: outsiderPeer } });
          expect([noToken.status, noToken.text]).toEqual([401, "go away"]);

          // 3. The join token alone: no member, no CA.
          const stolen = await add({ node: outsider, peerAddress: outsiderPeer });
          expect(stolen.status, stolen.text).toBe(401);
          expect(stolen.text).toMatch(
            /^admission_required: this join API gives an etcd member for k0s-3 only to a node the join broker admitted: send its admission token \(JOIN_BROKER_ADMISSION\) in the Join-Broker-Admission header/,
          );
          expect(stolen.contentType).toMatch(/^text\/plain/);
          const ca = await k0sApiCall(k, { method: "GET", path: "/v1beta1/ca", bearer });
          expect(ca.status, ca.text).toBe(401);
          expect(ca.text).toMatch(/^admission_required: /);

          // 4. A current admission, of another node.
          const ticket = await fetch(`${h.broker.localUrl}/v1/clusters/${h.cluster}/tickets`, {
            method: "POST",
            headers: { authorization: `Bearer ${h.token}`, "content-type": "application/json" },
            body: JSON.stringify(OTHER),
          });
          const view = (await ticket.json()) as { state: string; admission?: string };
          expect(view.state, JSON.stringify(view)).toBe("admitted");
          const other = view.admission!;
          const wrongNode = await add({ node: outsider, peerAddress: outsiderPeer }, other);
          expect([wrongNode.status, wrongNode.text.trim()]).toEqual([403, `wrong_node: the admission token is for node ${OTHER.node}, not ${outsider}`]);
          const wrongPeer = await add({ node: OTHER.node, peerAddress: outsiderPeer }, other);
          expect([wrongPeer.status, wrongPeer.text.trim()]).toEqual([
            403,
            `wrong_peer_url: the admission token is for peer URL ${OTHER.peerURL}, not ${outsiderPeer}`,
          ]);
          const problem = await add({ node: outsider, peerAddress: outsiderPeer }, other, "application/problem+json");
          expect(problem.contentType).toBe("application/problem+json");
          expect(JSON.parse(problem.text)).toMatchObject({ status: 403, code: "wrong_node" });

          // 5. Real k0s on the third host, started outside the gate with the join token: first
          //    alone, then with the other node's admission.
          const startRogue = (admission: string | null) => {
            const env: NodeJS.ProcessEnv = { ...k.env(), ...(admission ? { JOIN_BROKER_ADMISSION: admission } : {}) };
            delete env.JOIN_BROKER_URL;
            const args = [
              "controller",
              "--config",
              "/etc/k0s/k0s.yaml",
              "--token-file",
              "/etc/k0s/controller-token",
              `--disable-components=${disabledComponents(version)}`,
            ];
            const proc = k.spawn(outsider, "k0s", args, { stdio: ["ignore", "pipe", "pipe"], detached: true, env });
            let output = "";
            proc.stdout!.on("data", (d: Buffer) => (output += d));
            proc.stderr!.on("data", (d: Buffer) => (output += d));
            rogues.push(proc);
            const exited = new Promise<number | null>((ok) => proc.once("close", ok));
            return { proc, output: () => output, exited };
          };
          const stop = async (rogue: { proc: ReturnType<typeof spawn>; exited: Promise<number | null> }) => {
            try {
              process.kill(-rogue.proc.pid!, "SIGKILL");
            } catch {
              /* gone */
            }
            await rogue.exited;
          };
          const caRefusals = () => servers().match(/join broker admission check refused the cluster's CA: no Join-Broker-Admission header/g)?.length ?? 0;
          const beforeCa = caRefusals();
          const alone = startRogue(null);
          await eventually(`the join API to refuse ${outsider}'s CA request`, () => (caRefusals() > beforeCa ? true : null), 180_000);
          await stop(alone);
          expect(existsSync(join(k.lab.host(outsider).mounts.get("/var/lib/k0s")!, "pki", "ca.key")), "k0s wrote the cluster's CA key").toBe(false);
          writeFileSync(join(k.out, `rogue-alone-${outsider}.log`), alone.output());

          const withOther = startRogue(other);
          const refusal = new RegExp(
            `join broker admission check refused an etcd member for ${outsider} at ${outsiderPeer.replace(/[.]/g, "\\.")}: wrong_node: the admission token is for node ${OTHER.node}, not ${outsider}`,
          );
          await eventually(`the join API to refuse ${outsider}'s member add`, () => (refusal.test(servers()) ? true : null), 240_000);
          if (version === "1.28") {
            // k0s 1.28 tries 20 times half a second apart, then exits with the answer's reason.
            await Promise.race([withOther.exited, new Promise((r) => setTimeout(r, 120_000))]);
            expect(withOther.output()).toMatch(
              /unexpected response status when trying to join etcd cluster: 403 Forbidden: wrong_node: the admission token is for node k0s-9, not k0s-3/,
            );
          }
          await stop(withOther);
          writeFileSync(join(k.out, `rogue-other-admission-${outsider}.log`), withOther.output());

          // 6. Revoked, the other node's admission is refused even for its own node and peer URL.
          const revoked = await h.client.admin(h.cluster).revokeAdmission(jti(other), "test: a stolen admission");
          expect(revoked.status, JSON.stringify(revoked.body)).toBe(200);
          const gone = await add({ node: OTHER.node, peerAddress: OTHER.peerURL }, other);
          expect(gone.status, gone.text).toBe(410);
          expect(gone.text).toMatch(/^admission_revoked: /);

          // 7. Nothing was added.
          const after = k.members(first)!;
          log(`members: ${describeMembers(after)}`);
          expect(after.members.map((m) => m.ID).sort(), describeMembers(after)).toEqual(before.members.map((m) => m.ID).sort());
          expect(after.members.flatMap((m) => m.peerURLs ?? [])).not.toContain(outsiderPeer);
          expect(after.members.flatMap((m) => m.peerURLs ?? [])).not.toContain(OTHER.peerURL);
        } finally {
          for (const r of rogues) {
            try {
              process.kill(-r.pid!, "SIGKILL");
            } catch {
              /* gone */
            }
          }
          await b.close();
        }
      },
      900_000,
    );
  });
}
