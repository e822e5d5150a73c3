/**
 * Stands in for `cloudflare:workers` when the Worker tests' HTTP contract files run against
 * `join-broker serve` (the `contract-serve` project): `exports.default.fetch` sends the request
 * over loopback to the serve process the global setup started, whatever origin the test names.
 */
import { inject } from "vitest";

declare module "vitest" {
  export interface ProvidedContext {
    serveUrl: string;
  }
}

function toServe(input: RequestInfo | URL): string {
  const url = new URL(input instanceof Request ? input.url : String(input));
  return `${inject("serveUrl")}${url.pathname}${url.search}`;
}

export const exports = {
  overHttp: true,
  default: {
    fetch(input: RequestInfo | URL, init?: RequestInit): Promise<Response> {
      if (input instanceof Request) return fetch(new Request(toServe(input), input));
      return fetch(toServe(input), init);
    },
  },
};

/** src/broker/app.ts imports the JoinQueue class, which extends this; the class itself runs in workerd. */
export class DurableObject {
  constructor(
    readonly ctx: unknown,
    readonly env: unknown,
  ) {}
}

export const env = {};
