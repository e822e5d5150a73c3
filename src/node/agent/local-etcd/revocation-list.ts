/**
 * The certificates this node's etcd refuses: `<pki-dir>/crl.der`, which etcd reads for every new
 * TLS connection on both ports (`--client-crl-file`, `--peer-crl-file`). The join API keeps the
 * cluster's list (GET /v1beta1/etcd/crl, signed by the CA); the agent fetches it every 5 s while
 * it runs and rewrites the file (atomically) when the list changed, so that a revoked node's
 * certificates are refused everywhere within seconds. The bootstrap node starts with an empty
 * list signed by its own CA.
 *
 * A list is written only if the cluster's CA signed it and it is no older (its CRL number, etcd's
 * revision when it was made) than the one in the file: an answer from anyone else, or replayed,
 * changes nothing.
 * @module
 */
import { existsSync, readFileSync } from "node:fs";
import { writeFileAtomic } from "../../atomic-file.ts";
import { pkiFiles } from "../../pki/pki-dir.ts";
import {
  certificateFacts,
  createCertificateAuthority,
  createRevocationList,
  normalSerial,
  readRevocationList,
  type CertificateAuthority,
  type RevocationList,
} from "../../pki/x509.ts";
import type { Reporter } from "../core/progress.ts";

/** How often the agent asks the join API for the list. */
export const CRL_REFRESH_MS = 5_000;

/** The join API's answer to a request for its list: the list's bytes (not yet checked), or what went wrong. */
export type FetchedList = { body: Uint8Array } | { problem: string };

export class RevocationListKeeper {
  readonly #dir: string;
  readonly #url: string | null;
  readonly #r: Reporter;
  readonly #fetch: typeof fetch;
  #timer: ReturnType<typeof setInterval> | null = null;
  #busy = false;
  #ownRevokedSaid = false;
  #unavailableSaid = false;

  constructor(pkiDir: string, joinApiUrl: string | null, reporter: Reporter, fetchFn: typeof fetch = fetch) {
    this.#dir = pkiDir;
    this.#url = joinApiUrl ? `${joinApiUrl.replace(/\/+$/, "")}/v1beta1/etcd/crl` : null;
    this.#r = reporter;
    this.#fetch = fetchFn;
  }

  get file(): string {
    return pkiFiles(this.#dir).crl;
  }

  /** The list in the file now, if the CA signed it (null: none, or not one). */
  async load(): Promise<RevocationList | null> {
    const files = pkiFiles(this.#dir);
    if (!existsSync(files.crl) || !existsSync(files.ca)) return null;
    try {
      return await readRevocationList(new Uint8Array(readFileSync(files.crl)), readFileSync(files.ca, "utf8"));
    } catch {
      return null;
    }
  }

  /** The bootstrap node: an empty list signed by its own CA, unless a list is there already. */
  async ensureOwn(ca: CertificateAuthority): Promise<void> {
    if (await this.load()) return;
    const list = await createRevocationList(ca, [], 0n);
    writeFileAtomic(this.file, Buffer.from(list.der));
    this.#r.event("pki", `wrote an empty revocation list signed by the CA to ${this.file}: etcd refuses the certificates listed there`, { file: this.file });
  }

  /**
   * Asks the join API for its list now, to be checked and written by `refresh` later: a joiner
   * asks beside its add, and checks the answer once the add brought the CA. Never rejects.
   */
  async fetchList(signal?: AbortSignal): Promise<FetchedList> {
    if (!this.#url) return { problem: "no join API to ask" };
    try {
      const res = await this.#fetch(this.#url, { signal: signal ? AbortSignal.any([signal, AbortSignal.timeout(5_000)]) : AbortSignal.timeout(5_000) });
      const body = new Uint8Array(await res.arrayBuffer());
      if (res.status !== 200)
        return { problem: `the join API's revocation list: HTTP ${res.status}${res.status === 404 ? " (a join API without this path)" : ""}` };
      return { body };
    } catch (e) {
      return { problem: `the join API's revocation list: ${(e as Error).message}` };
    }
  }

  /**
   * Fetches the join API's list (or takes the answer `pending` holds) and writes it when the CA
   * signed it, it is not older than the one in the file, and it lists other serials. Resolves with
   * what went wrong, or null.
   */
  async refresh(signal?: AbortSignal, pending?: Promise<FetchedList>): Promise<string | null> {
    if (!this.#url) return "no join API to ask";
    // A joiner learns the CA with its first certificates: nothing to check a list against before.
    if (!existsSync(pkiFiles(this.#dir).ca)) return "no CA certificate yet to check the list against";
    const fetched = await (pending ?? this.fetchList(signal));
    if ("problem" in fetched) return fetched.problem;
    const files = pkiFiles(this.#dir);
    let list: RevocationList;
    try {
      list = await readRevocationList(fetched.body, readFileSync(files.ca, "utf8"));
    } catch (e) {
      return `the join API's revocation list is refused: ${(e as Error).message}`;
    }
    const current = await this.load();
    if (current && list.number < current.number) return null; // an older list (another join API, a replay): ours stands
    const same = current && current.serials.length === list.serials.length && current.serials.every((s) => list.serials.includes(s));
    if (!same || !current) {
      writeFileAtomic(files.crl, Buffer.from(list.der));
      this.#r.event(
        "pki",
        `the revocation list now names ${list.serials.length} certificate${list.serials.length === 1 ? "" : "s"} (list ${list.number}): etcd refuses them from its next connection on`,
        {
          revoked: list.serials.length,
          crlNumber: list.number.toString(),
        },
      );
    } else if (list.number > current.number) {
      // Same serials, newer number: keep the file (etcd reads only the serials), remember nothing more.
    }
    this.#sayIfOwnRevoked(list);
    return null;
  }

  /**
   * Before a joiner's etcd first starts: the list asked for beside its add (`pending`), else the
   * one in the file, else the join API's now (a few tries). Without one, an
   * empty placeholder, so that etcd starts reading the file (it reads it for every connection):
   * the join API's list replaces it as soon as it answers, with no restart.
   */
  async ensureBeforeStart(signal: AbortSignal, pending?: Promise<FetchedList>): Promise<void> {
    // Asked for beside the add (a new learner's own certificates are on no list): no wait here.
    if (pending && (await this.refresh(signal, pending)) === null) return;
    if (await this.load()) return;
    let problem: string | null = null;
    for (let attempt = 0; attempt < 5; attempt++) {
      problem = await this.refresh(signal);
      if (problem === null) return;
      await new Promise((r) => setTimeout(r, 1_000));
    }
    if (existsSync(this.file)) return;
    await this.ensurePlaceholder();
    this.#r.event("pki", `${problem}: etcd starts with an empty revocation list until the join API's arrives (it is asked every ${CRL_REFRESH_MS / 1000} s)`, {
      problem,
    });
  }

  /**
   * An empty list where there is none (an etcd started by a release before these lists, say):
   * etcd refuses every connection when the file it is told to read is missing, and reads only
   * the serials (this one is signed by a key of its own, which the agent never takes for the
   * CA's: the join API's list replaces it).
   */
  async ensurePlaceholder(): Promise<void> {
    if (existsSync(this.file)) return;
    const { ca } = await createCertificateAuthority("empty revocation list until the join API's arrives", 1);
    const list = await createRevocationList(ca, [], -1n);
    writeFileAtomic(this.file, Buffer.from(list.der));
  }

  /** Every 5 s until stopped. */
  start(): void {
    if (this.#timer || !this.#url) return;
    this.#timer = setInterval(() => void this.#tick(), CRL_REFRESH_MS);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
  }

  async #tick(): Promise<void> {
    if (this.#busy) return;
    this.#busy = true;
    try {
      const problem = await this.refresh();
      if (problem) {
        if (!this.#unavailableSaid) this.#r.failure("join-api", `${problem}; etcd keeps refusing what the last list names`);
        this.#unavailableSaid = true;
      } else if (this.#unavailableSaid) {
        this.#r.reachable("join-api");
        this.#unavailableSaid = false;
      }
    } finally {
      this.#busy = false;
    }
  }

  #sayIfOwnRevoked(list: RevocationList): void {
    const own = ownSerials(this.#dir);
    const listed = own.filter((s) => list.serials.includes(s));
    if (listed.length === 0 || this.#ownRevokedSaid) return;
    this.#ownRevokedSaid = true;
    this.#r.event(
      "pki",
      `this node's own certificates are revoked (${listed.join(", ")}): every etcd of the cluster refuses them; its member was removed or its admission revoked`,
      { revoked: listed.join(",") },
    );
  }
}

/** The serials of this node's peer and server certificates (those that can be read). */
export function ownSerials(pkiDir: string): string[] {
  const files = pkiFiles(pkiDir);
  const out: string[] = [];
  for (const path of [files.peerCert, files.serverCert, files.apiServerCert]) {
    try {
      out.push(normalSerial(certificateFacts(readFileSync(path, "utf8")).serial));
    } catch {
      /* not there */
    }
  }
  return out;
}
