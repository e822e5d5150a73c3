/**
 * Stands in for `cloudflare:workers` when the Worker tests' HTTP contract files run against
 * `join-broker serve` (the `contract-serve` project): `exports.default.fetch` sends the request
 * over loopback to the serve process this file's setup started (serve-contract-setup.ts),
 * whatever origin the test names.
 */
let serveUrl: string | null = null;

/** The setup file's serve, for this test file's requests. */
export function serveForThisFile(url: string): void {
  serveUrl = url;
}

function toServe(input: RequestInfo | URL): string {
  if (!serveUrl) throw new Error("no join-broker serve for this file: test/support/serve-contract-setup.ts starts one before its tests");
  const url = new URL(input instanceof Request ? input.url : String(input));
  return `${serveUrl}${url.pathname}${url.search}`;
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
