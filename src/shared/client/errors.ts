/**
 * What a broker call can fail with: the broker's own problem+json answer, no answer at all, or
 * an input the broker would refuse anyway (checked before sending, with the broker's schemas).
 * @module
 */

import type { Problem } from "../protocol/problem.ts";

/** The RFC 9457 body every broker error carries (the contract's `Problem`); `code` is the stable part to switch on. */
export type ProblemBody = Problem<string>;

/** The broker answered with a 4xx/5xx. */
export class BrokerProblem extends Error {
  readonly status: number;
  readonly problem: ProblemBody;
  /** The response body exactly as received. */
  readonly text: string;
  /** Seconds from `Retry-After`, when the broker sent one. */
  readonly retryAfter: number | undefined;

  constructor(status: number, problem: ProblemBody, text: string, retryAfter: number | undefined) {
    super(`${problem.code} (HTTP ${status}): ${problem.detail}`);
    this.name = "BrokerProblem";
    this.status = status;
    this.problem = problem;
    this.text = text;
    this.retryAfter = retryAfter;
  }

  get code(): string {
    return this.problem.code;
  }

  /** The credential was missing, wrong, or does not grant this call. */
  get refused(): boolean {
    return this.status === 401 || this.status === 403;
  }

  /** "Not now": asking again later may succeed. */
  get transient(): boolean {
    return this.status === 429 || this.status === 503;
  }
}

/** No usable HTTP answer: connection refused, DNS, timeout, or a body that is not the expected JSON. */
export class BrokerUnreachable extends Error {
  readonly code = "ERR_BROKER_UNREACHABLE";
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "BrokerUnreachable";
  }
}

/** An argument the broker's request schemas reject; nothing was sent. */
/** One reason an input was refused: the field (dotted path), the rule, and the bound it broke. */
export interface InputIssue {
  path: string;
  message: string;
  code?: string;
  minimum?: number;
  maximum?: number;
}

export class InvalidInput extends Error {
  readonly code = "ERR_INVALID_INPUT";
  constructor(
    message: string,
    /** Each refused field, so that a caller can name it as its user typed it (a flag, say). */
    readonly issues: InputIssue[] = [],
  ) {
    super(message);
    this.name = "InvalidInput";
  }
}

/** A problem body from any answer, synthesized when the broker (or a proxy in front of it) sent something else. */
export function toProblem(status: number, text: string): ProblemBody {
  try {
    const body = JSON.parse(text) as Partial<ProblemBody>;
    if (body && typeof body === "object" && typeof body.code === "string") {
      return {
        type: String(body.type ?? "about:blank"),
        title: String(body.title ?? ""),
        status: Number(body.status ?? status),
        detail: String(body.detail ?? ""),
        ...body,
        code: body.code,
      };
    }
  } catch {
    /* not JSON: described below */
  }
  const excerpt = text.trim().slice(0, 200);
  return { type: "about:blank", title: `HTTP ${status}`, status, detail: excerpt || `HTTP ${status} without a problem body`, code: `http_${status}` };
}
