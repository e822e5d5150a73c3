/**
 * Turns etcd's auth on, as the bootstrap node does before it reports its cluster ready: `root`
 * (the CA key's holders: the join API) with every right, the role `kube-apiserver` (read-write on
 * every key but this project's records) for the users of the API servers' client certificates
 * (ours, kubeadm's and k0s's common names), and no user for anyone else. From then on a node's own certificates (their CN is the node's name, which
 * no user has: the reserved names keep `root` and `kube-apiserver` out of reach) can neither
 * change the membership nor read or write a key; only the join API, signed in as `root`, adds,
 * promotes and removes members.
 *
 * Every step is safe to run again (an agent restarted halfway through finishes it). etcd 3.4 has
 * no auth status call: signing in tells (a token, "not enabled", or a wrong password).
 * @module
 */
import { API_SERVER_USER, API_SERVER_USERS, RECORDS_PREFIX, ROOT_USER } from "../pki/etcd-identities.ts";
import type { EtcdGateway, EtcdResult } from "./gateway.ts";

/** One auth call: its path under /v3/auth/ and its body. */
type AuthStep = [Parameters<EtcdGateway["auth"]>[0], Record<string, unknown>];

/** etcd's answer when what is created exists already: the step is done. */
const ALREADY = /already exist/i;

/** The key ranges the API servers' role may read and write: everything below and above the records. */
export function apiServerRanges(): { key: Buffer; rangeEnd: Buffer }[] {
  const records = Buffer.from(RECORDS_PREFIX);
  const after = Buffer.from(records);
  after[after.length - 1] = after[after.length - 1]! + 1; // "/join-broker0": the first key past the prefix
  return [
    { key: Buffer.from([0]), rangeEnd: records },
    { key: after, rangeEnd: Buffer.from([0]) }, // range_end "\0": every key from `key` on
  ];
}

/**
 * Turns auth on unless it is on already. `gateway` carries root's credentials (and a client
 * certificate without a common name, which the JSON gateway wants once auth is on). Resolves
 * with whether this call turned it on; etcd's refusal otherwise (a root whose password is not
 * the one derived from this CA key: someone else set etcd's auth up).
 */
export async function ensureEtcdAuth(gateway: EtcdGateway, rootPassword: string): Promise<EtcdResult<{ turnedOn: boolean }>> {
  const signed = await gateway.signIn();
  if (!signed.ok) return signed;
  if (signed.value) return { ok: true, value: { turnedOn: false }, endpoint: signed.endpoint };
  // Three rounds, the calls of each sent at once (etcd commits calls that arrive together in one
  // raft round, one disk sync): what needs nothing, the grants once their users and role exist,
  // the switch. The twelve calls one after the other were twelve rounds on the new cluster's
  // first node, before it may report the cluster ready and the next node be admitted.
  const rounds: AuthStep[][] = [
    [
      ["user/add", { name: ROOT_USER, password: rootPassword }],
      ["role/add", { name: API_SERVER_USER }],
      // Users without a password (3.4.23 and later take the option): they sign in by their client
      // certificates only, and etcd spends no bcrypt round on them.
      ...API_SERVER_USERS.map((user): AuthStep => ["user/add", { name: user, options: { no_password: true } }]),
    ],
    [
      ["user/grant", { user: ROOT_USER, role: ROOT_USER }],
      ...apiServerRanges().map(
        (r): AuthStep => [
          "role/grant",
          { name: API_SERVER_USER, perm: { permType: "READWRITE", key: r.key.toString("base64"), range_end: r.rangeEnd.toString("base64") } },
        ],
      ),
      ...API_SERVER_USERS.map((user): AuthStep => ["user/grant", { user, role: API_SERVER_USER }]),
    ],
    [["enable", {}]],
  ];
  let endpoint = "";
  for (const round of rounds) {
    const answers = await Promise.all(round.map(([path, body]) => gateway.auth(path, body)));
    const refused = answers.find((done) => !done.ok && !ALREADY.test(done.error.message));
    if (refused && !refused.ok) return refused;
    endpoint = answers.find((done) => done.ok)?.endpoint ?? endpoint;
  }
  // Later calls sign in when etcd asks for a user (each sign-in is a raft entry and a bcrypt round: none now).
  return { ok: true, value: { turnedOn: true }, endpoint };
}
