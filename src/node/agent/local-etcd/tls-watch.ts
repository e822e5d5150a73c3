/**
 * No silent wait on TLS. While the agent waits for its etcd (--pki-dir), it reads etcd's own log
 * as it grows and hears its own requests' handshakes: each certificate refusal is reported once
 * (step `etcd-tls`), within a second or two of etcd logging it, naming the certificate file, the
 * other end and etcd's words. A start that cannot succeed ends in a Refusal (exit 3) instead of a
 * wait for the lease: certificate refusals (not of a validity period, which a clock can explain)
 * for CANNOT_SUCCEED_MS, without one answer from etcd to this node's own requests meanwhile.
 * Refusals that other clients meet while this node is answered are reported, never fatal.
 * @module
 */
import { etcdTlsRejections, type EtcdTlsRejection } from "../../etcd/etcd-log.ts";
import { TlsHandshakeError } from "../../etcd/tls-fetch.ts";
import type { PkiFiles } from "../../pki/pki-dir.ts";
import { Refusal } from "../core/errors.ts";
import type { Reporter } from "../core/progress.ts";

/** How long certificate refusals may go on, with no answer to this node, before the start is called hopeless. */
export const CANNOT_SUCCEED_MS = 10_000;
/** How recent the last refusal must be then (etcd restarting with back-off between attempts logs one per attempt). */
const STILL_REFUSING_MS = 15_000;
/** etcd's log is read at most this often. */
const READ_EVERY_MS = 1_000;

export interface EtcdLogSource {
  logFrom(offset: number): { text: string; end: number };
  readonly logStart: number;
}

export class TlsWatch {
  /** First certificate refusal since this node was last answered. */
  #since: number | null = null;
  #latest = 0;
  #offset: number | null = null;
  #lastRead = 0;
  readonly #reported = new Set<string>();
  /** What was reported, for the refusal's words (the first of each kind). */
  readonly #said: string[] = [];

  constructor(
    readonly files: PkiFiles,
    readonly reporter: Reporter,
    /** etcd's log, when the agent runs etcd (--etcd-bin). */
    readonly log: EtcdLogSource | null,
    readonly clientURL: string,
    readonly now: () => number = Date.now,
  ) {}

  /** etcd answered one of this node's requests: its certificates are good enough for that. */
  answered(): void {
    this.#since = null;
  }

  /** This node's own request to its etcd failed over a certificate. */
  refusedOwn(e: TlsHandshakeError): void {
    const line = `this node's own request to its etcd at ${this.clientURL} failed the TLS handshake: ${e.message}`;
    this.#note(`own:${e.code}`, line, e.expiry, { side: e.side, code: e.code });
  }

  /** `inner` for this node's requests to its etcd, each certificate refusal told to this watch. */
  watched(inner: typeof fetch): typeof fetch {
    return (async (input: Parameters<typeof fetch>[0], init?: Parameters<typeof fetch>[1]) => {
      try {
        return await inner(input, init);
      } catch (e) {
        if (e instanceof TlsHandshakeError) this.refusedOwn(e);
        throw e;
      }
    }) as typeof fetch;
  }

  /** Reads what etcd logged since the last look, reports what is new; throws a Refusal once this start cannot succeed. */
  check(): void {
    this.#readLog();
    const now = this.now();
    if (this.#since !== null && now - this.#since >= CANNOT_SUCCEED_MS && now - this.#latest <= STILL_REFUSING_MS) {
      const f = this.files;
      throw new Refusal(
        `certificates are refused, so this start cannot succeed: ${this.#said.slice(0, 3).join("; ")} ` +
          `(${Math.round((now - this.#since) / 1000)} s of refusals, no answer from etcd at ${this.clientURL}). etcd checks both ports against ${f.ca}; ` +
          `this node presents ${f.serverCert} (client port, and as a client) and ${f.peerCert} (peer port): each must be signed by that CA, and so must the other members' ` +
          `(etcd, as Go, finds a certificate's CA by its issuer's exact bytes: openssl verify may accept what etcd refuses)`,
      );
    }
  }

  #readLog(): void {
    if (!this.log || this.now() - this.#lastRead < READ_EVERY_MS) return;
    this.#lastRead = this.now();
    // From where the etcd of this wait started writing; a restart appends.
    this.#offset ??= this.log.logStart;
    const { text, end } = this.log.logFrom(this.#offset);
    this.#offset = end;
    for (const r of etcdTlsRejections(text))
      this.#note(`log:${r.at}:${r.refusedBy}:${hostOf(r.remote)}:${r.error}`, this.#describe(r), r.expiry, {
        at: r.at,
        remote: r.remote,
        error: r.error,
        refusedBy: r.refusedBy,
      });
  }

  #note(key: string, line: string, expiry: boolean, fields: Record<string, string>): void {
    const now = this.now();
    if (!expiry) {
      this.#since ??= now;
      this.#latest = now;
    }
    if (this.#reported.has(key)) return;
    this.#reported.add(key);
    if (!expiry) this.#said.push(line);
    this.reporter.event(
      "etcd-tls",
      expiry ? `${line} (a certificate outside its validity period: check this machine's clock and the other end's)` : line,
      fields,
    );
  }

  /** A refusal in etcd's log as a line that names the certificate each end presented. */
  #describe(r: EtcdTlsRejection): string {
    const f = this.files;
    const said = `etcd's words: "${r.error}"`;
    if (r.at === "a peer") {
      return r.refusedBy === "etcd"
        ? `etcd could not verify the certificate of its peer ${r.remote} against ${f.ca}: ${said}`
        : `etcd's peer ${r.remote} refused this node's peer certificate ${f.peerCert}: ${said}`;
    }
    const port = r.at === "client port" ? "client port" : r.at === "peer port" ? "peer port" : "client or peer port (etcd 3.4 does not say which)";
    const mine = r.at === "client port" ? f.serverCert : r.at === "peer port" ? f.peerCert : `${f.serverCert} or ${f.peerCert}`;
    return r.refusedBy === "etcd"
      ? `etcd rejected the certificate of ${r.remote} on its ${port}, which must be signed by the CA in ${f.ca} (this node's own is ${f.serverCert}): ${said}`
      : `${r.remote} refused etcd's certificate ${mine} on its ${port}: ${said}`;
  }
}

function hostOf(remote: string): string {
  try {
    return new URL(remote).host;
  } catch {
    return remote.replace(/:\d+$/, "");
  }
}
