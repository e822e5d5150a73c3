import { describe, expect, it } from "vitest";
import { TlsHandshakeError } from "../../etcd/tls-fetch.ts";
import { pkiFiles } from "../../pki/pki-dir.ts";
import { Refusal } from "../core/errors.ts";
import type { Reporter, Step } from "../core/progress.ts";
import { CANNOT_SUCCEED_MS, TlsWatch } from "./tls-watch.ts";

/** A log that grows as the test appends lines (etcd's zap JSON, as etcd 3.6 writes it). */
class GrowingLog {
  text = "";
  readonly logStart = 0;
  append(line: Record<string, unknown>): void {
    this.text += `${JSON.stringify({ level: "warn", ts: "2026-12-06T03:12:58Z", ...line })}\n`;
  }
  logFrom(offset: number): { text: string; end: number } {
    return { text: this.text.slice(offset), end: this.text.length };
  }
}

function setup() {
  let now = 1_000_000;
  const events: { step: Step; msg: string }[] = [];
  const reporter = { event: (step: Step, msg: string) => events.push({ step, msg }), retry() {}, failure() {}, reachable() {}, close() {} } as Reporter;
  const log = new GrowingLog();
  const watch = new TlsWatch(pkiFiles("/pki"), reporter, log, "https://127.0.0.1:2379", () => now);
  return { watch, log, events, advance: (ms: number) => (now += ms) };
}

const unknownAuthority = {
  msg: "rejected connection on client endpoint",
  "remote-addr": "127.0.0.1:40130",
  "server-name": "",
  error: "tls: failed to verify certificate: x509: certificate signed by unknown authority",
};

describe("the TLS watch while the agent waits for its etcd", () => {
  it("reports each refusal once, naming the certificate files, the other end and etcd's words", () => {
    const { watch, log, events, advance } = setup();
    log.append(unknownAuthority);
    log.append({ ...unknownAuthority, "remote-addr": "127.0.0.1:40134" });
    watch.check();
    advance(1_000);
    log.append({
      msg: "failed to get cluster response",
      address: "https://10.0.0.5:2380/members",
      error: 'Get "https://10.0.0.5:2380/members": remote error: tls: bad certificate',
    });
    watch.check();
    expect(events).toEqual([
      {
        step: "etcd-tls",
        msg: "etcd rejected the certificate of 127.0.0.1:40130 on its client port, which must be signed by the CA in /pki/ca.crt (this node's own is /pki/server.crt): etcd's words: \"tls: failed to verify certificate: x509: certificate signed by unknown authority\"",
      },
      {
        step: "etcd-tls",
        msg: 'etcd\'s peer https://10.0.0.5:2380/members refused this node\'s peer certificate /pki/peer.crt: etcd\'s words: "Get "https://10.0.0.5:2380/members": remote error: tls: bad certificate"',
      },
    ]);
  });

  it("ends a start that cannot succeed: refusals for 10 s and no answer to this node", () => {
    const { watch, log, events, advance } = setup();
    watch.refusedOwn(
      new TlsHandshakeError(
        "ours",
        "ERR_SSL_TLSV1_ALERT_UNKNOWN_CA",
        false,
        "127.0.0.1:2379 refused the client certificate /pki/server.crt (TLS alert: unknown CA)",
      ),
    );
    log.append(unknownAuthority);
    for (let t = 0; t < CANNOT_SUCCEED_MS - 1_000; t += 1_000) {
      watch.check();
      advance(1_000);
      watch.refusedOwn(new TlsHandshakeError("ours", "ERR_SSL_TLSV1_ALERT_UNKNOWN_CA", false, "again"));
    }
    expect(events.map((e) => e.step)).toEqual(["etcd-tls", "etcd-tls"]);
    advance(1_000);
    const refusal = (() => {
      try {
        watch.check();
        return null;
      } catch (e) {
        return e;
      }
    })();
    expect(refusal).toBeInstanceOf(Refusal);
    expect((refusal as Refusal).message).toMatch(
      /^certificates are refused, so this start cannot succeed: this node's own request to its etcd at https:\/\/127\.0\.0\.1:2379 failed the TLS handshake: 127\.0\.0\.1:2379 refused the client certificate \/pki\/server\.crt \(TLS alert: unknown CA\); etcd rejected the certificate of 127\.0\.0\.1:40130 .* \(10 s of refusals, no answer from etcd at https:\/\/127\.0\.0\.1:2379\)\. etcd checks both ports against \/pki\/ca\.crt/,
    );
  });

  it("does not end a start whose own requests are answered (another client's certificate is refused), nor one refused for a clock", () => {
    const { watch, log, events, advance } = setup();
    for (let t = 0; t < 3 * CANNOT_SUCCEED_MS; t += 1_000) {
      log.append(unknownAuthority);
      watch.check();
      watch.answered();
      advance(1_000);
    }
    expect(events).toHaveLength(1);
    const clock = setup();
    for (let t = 0; t < 3 * CANNOT_SUCCEED_MS; t += 1_000) {
      clock.log.append({
        ...unknownAuthority,
        error:
          "tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time 2026-12-06T03:13:00Z is before 2026-12-06T03:20:00Z",
      });
      clock.watch.check();
      clock.advance(1_000);
    }
    expect(clock.events.map((e) => e.msg)).toEqual([
      expect.stringMatching(
        /certificate has expired or is not yet valid.*\(a certificate outside its validity period: check this machine's clock and the other end's\)$/,
      ),
    ]);
  });
});
