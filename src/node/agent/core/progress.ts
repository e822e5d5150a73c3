/**
 * The agent's progress on stderr. On a terminal it is one line, rewritten in place (step,
 * queue position, estimated wait, elapsed time); otherwise one plain log line per event, or one
 * JSON object per line with `--log-format json` (what scripts and the end-to-end tests read).
 * Repeated identical waiting states are not logged again, so a long queue stays quiet. Failures
 * to reach a service are always logged: the first at once, then at most one line every 10 s per
 * service, saying how many were folded into it.
 * @module
 */
import type { LogFormat } from "./agent-options.ts";

import type { Step } from "./progress-steps.ts";

export type { Step };

/** The services whose failures the agent reports. */
export type Service = "broker" | "join-api";

/** How often a repeating failure is logged when the output is not a terminal. */
export const FAILURE_LOG_INTERVAL_MS = 10_000;

export type Fields = Record<string, string | number | boolean | null | undefined>;

export interface Reporter {
  /** A step or a notable event. */
  event(step: Step, message: string, fields?: Fields): void;
  /** A retry: shown on a terminal, logged only with --verbose (but always as JSON). */
  retry(message: string, fields?: Fields): void;
  /**
   * A failed call to a service (the broker is unreachable, or answers 5xx/429): shown like a retry
   * on a terminal, and without one logged at once, then at most every FAILURE_LOG_INTERVAL_MS.
   */
  failure(service: Service, message: string, fields?: Fields): void;
  /** The service answered: after failures, says once that it is reachable again and how long it was not. */
  reachable(service: Service): void;
  /** Ends the updating line, if any. */
  close(): void;
}

export interface ReporterOptions {
  format: LogFormat;
  node: string;
  verbose: boolean;
  stream?: NodeJS.WriteStream;
  now?: () => number;
}

export function createReporter(options: ReporterOptions): Reporter {
  const stream = options.stream ?? process.stderr;
  const now = options.now ?? Date.now;
  const reporter: FormatReporter =
    options.format === "json"
      ? new JsonReporter(stream, options.node)
      : stream.isTTY
        ? new TerminalReporter(stream, options.node, now)
        : new PlainReporter(stream, options.node, options.verbose, now);
  return new OutageReporter(reporter, now);
}

type FormatReporter = Omit<Reporter, "reachable">;

const SERVICE_NAMES: Record<Service, string> = { broker: "the broker", "join-api": "the join API" };

/**
 * Remembers when each service started failing, so that its first answer after an outage is one
 * line ("the broker is reachable again after 42 s, 7 failed attempts"), whatever the format.
 */
class OutageReporter implements Reporter {
  readonly #outages = new Map<Service, { since: number; failures: number }>();

  constructor(
    readonly inner: FormatReporter,
    readonly now: () => number,
  ) {}

  event(step: Step, message: string, fields?: Fields): void {
    this.inner.event(step, message, fields);
  }

  retry(message: string, fields?: Fields): void {
    this.inner.retry(message, fields);
  }

  failure(service: Service, message: string, fields?: Fields): void {
    const outage = this.#outages.get(service);
    if (outage) outage.failures++;
    else this.#outages.set(service, { since: this.now(), failures: 1 });
    this.inner.failure(service, message, fields);
  }

  reachable(service: Service): void {
    const outage = this.#outages.get(service);
    if (!outage) return;
    this.#outages.delete(service);
    const seconds = Math.round((this.now() - outage.since) / 1000);
    this.inner.event(
      "reachable",
      `${SERVICE_NAMES[service]} is reachable again after ${seconds} s (${outage.failures} failed attempt${outage.failures === 1 ? "" : "s"})`,
      {
        service,
        outageSeconds: seconds,
        failures: outage.failures,
      },
    );
  }

  close(): void {
    this.inner.close();
  }
}

/** Lets through the first failure of a service, then one per interval, counting the rest. */
class FailureThrottle {
  readonly #last = new Map<Service, { at: number; folded: number }>();

  constructor(readonly now: () => number) {}

  /** null: stay quiet; else how many failures of `service` were not logged since the last line. */
  admit(service: Service): number | null {
    const now = this.now();
    const last = this.#last.get(service);
    if (last && now - last.at < FAILURE_LOG_INTERVAL_MS) {
      last.folded++;
      return null;
    }
    this.#last.set(service, { at: now, folded: 0 });
    return last?.folded ?? 0;
  }
}

const foldedNote = (folded: number) => (folded > 0 ? ` (and ${folded} more like it in the last ${FAILURE_LOG_INTERVAL_MS / 1000} s)` : "");

class JsonReporter implements FormatReporter {
  constructor(
    readonly stream: NodeJS.WritableStream,
    readonly node: string,
  ) {}

  event(step: Step, message: string, fields: Fields = {}): void {
    this.stream.write(`${JSON.stringify({ time: new Date().toISOString(), node: this.node, step, msg: message, ...fields })}\n`);
  }

  retry(message: string, fields: Fields = {}): void {
    this.event("retry", message, fields);
  }

  failure(service: Service, message: string, fields: Fields = {}): void {
    this.event("retry", message, { ...fields, failure: service });
  }

  close(): void {}
}

class PlainReporter implements FormatReporter {
  #lastQueued = "";
  #lastQueuedAt = -Infinity;
  readonly #throttle: FailureThrottle;

  constructor(
    readonly stream: NodeJS.WritableStream,
    readonly node: string,
    readonly verbose: boolean,
    now: () => number,
  ) {
    this.#throttle = new FailureThrottle(now);
  }

  event(step: Step, message: string, fields: Fields = {}): void {
    if (step === "queued") {
      // Log a waiting node again only when its position moved, or once a minute.
      const key = `${fields.position} ${fields.waitingFor}`;
      if (key === this.#lastQueued && performance.now() - this.#lastQueuedAt < 60_000) return;
      this.#lastQueued = key;
      this.#lastQueuedAt = performance.now();
    }
    const eta = step === "queued" && typeof fields.estimatedWaitSeconds === "number" ? `, about ${fields.estimatedWaitSeconds} s to go` : "";
    this.stream.write(`${new Date().toISOString()} ${this.node} ${step}: ${message}${eta}\n`);
  }

  retry(message: string, fields: Fields = {}): void {
    if (this.verbose) this.event("retry", message, fields);
  }

  failure(service: Service, message: string, fields: Fields = {}): void {
    if (this.verbose) {
      this.event("retry", message, fields);
      return;
    }
    const folded = this.#throttle.admit(service);
    if (folded !== null) this.event("retry", `${message}${foldedNote(folded)}`, fields);
  }

  close(): void {}
}

const FINAL_STEPS: Step[] = ["joined", "refused", "gave-up", "error", "stopping"];

class TerminalReporter implements FormatReporter {
  readonly #started: number;
  #line = "";
  #step: Step = "start";
  #fields: Fields = {};
  #since: number;
  readonly #timer: NodeJS.Timeout;

  constructor(
    readonly stream: NodeJS.WriteStream,
    readonly node: string,
    readonly now: () => number,
  ) {
    this.#started = now();
    this.#since = this.#started;
    // Tick the clock and the countdown between events.
    this.#timer = setInterval(() => this.#render(), 1000);
    this.#timer.unref();
  }

  event(step: Step, message: string, fields: Fields = {}): void {
    if (FINAL_STEPS.includes(step) || step === "running" || step === "reachable") {
      this.#clear();
      this.stream.write(`${this.node} ${step}: ${message}\n`);
      this.#line = "";
      return;
    }
    if (step !== this.#step || step === "queued") this.#since = this.now();
    this.#step = step;
    this.#fields = fields;
    this.#line = message;
    this.#render();
  }

  retry(message: string, fields: Fields = {}): void {
    this.#fields = { ...this.#fields, ...fields };
    this.#line = `${this.#stepMessageHead()}${message}`;
    this.#render();
  }

  failure(_service: Service, message: string, fields: Fields = {}): void {
    this.retry(message, fields);
  }

  close(): void {
    clearInterval(this.#timer);
    this.#clear();
  }

  #stepMessageHead(): string {
    return this.#step === "queued" ? `position ${this.#fields.position ?? "?"}, ` : "";
  }

  #render(): void {
    if (!this.#line) return;
    const elapsed = formatDuration(this.now() - this.#started);
    let eta = "";
    if (this.#step === "queued" && typeof this.#fields.estimatedWaitSeconds === "number") {
      const left = Math.max(0, this.#fields.estimatedWaitSeconds - Math.round((this.now() - this.#since) / 1000));
      eta = left > 0 ? ` · about ${formatDuration(left * 1000)} to go` : " · any moment now";
    }
    const text = `${this.node} · ${this.#step} · ${this.#line}${eta} · ${elapsed}`;
    // A pseudo-terminal may report 0 columns: assume a common width then.
    const width = Math.max(20, (this.stream.columns || 100) - 1);
    this.stream.write(`\r\x1b[2K${text.length > width ? `${text.slice(0, width - 1)}…` : text}`);
  }

  #clear(): void {
    this.stream.write("\r\x1b[2K");
  }
}

export function formatDuration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  const m = Math.floor(s / 60);
  return m > 0 ? `${m}m${String(s % 60).padStart(2, "0")}s` : `${s}s`;
}
