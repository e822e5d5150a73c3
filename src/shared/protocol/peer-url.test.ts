import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { canonicalIpv6, parsePeerUrl } from "./peer-url.ts";
import { canonicalPeerUrl, peerUrlProblem } from "./identifiers.ts";

describe("parsePeerUrl", () => {
  it.each([
    ["http://127.0.0.1:23815", "http://127.0.0.1:23815"],
    ["https://10.0.0.11:2380/", "https://10.0.0.11:2380"],
    ["HTTP://127.0.0.1:23815", "http://127.0.0.1:23815"],
    ["HttpS://Ctrl-1.Example.COM:2380", "https://ctrl-1.example.com:2380"],
    ["http://localhost:1", "http://localhost:1"],
    ["http://0.0.0.0:65535", "http://0.0.0.0:65535"],
    ["http://[::1]:2380", "http://[::1]:2380"],
    ["http://[2001:DB8:0:0:0:0:0:1]:2380", "http://[2001:db8::1]:2380"],
    ["http://[0:0:0:0:0:ffff:10.0.0.1]:2380", "http://[::ffff:a00:1]:2380"],
    ["http://xn--bcher-kva.example:2380", "http://xn--bcher-kva.example:2380"],
  ])("accepts %j as %j", (input, canonical) => {
    const r = parsePeerUrl(input);
    expect(r).toMatchObject({ ok: true, value: { canonical } });
    expect(canonicalPeerUrl(input)).toBe(canonical);
  });

  it.each([
    " http://127.0.0.1:23815",
    "http://127.0.0.1:23815 ",
    "http:/127.0.0.1:23815",
    "http:127.0.0.1:23815",
    "//127.0.0.1:23815",
    "127.0.0.1:23815",
    "http://0177.0.0.1:23815",
    "http://2130706433:23815",
    "http://0x7f.0.0.1:23815",
    "http://127.1:23815",
    "http://127.0.0.256:23815",
    "http://127.0.0.1:023815",
    "http://127.0.0.1:0",
    "http://127.0.0.1:65536",
    "http://127.0.0.1:",
    "http://127.0.0.1",
    "https://host.example",
    "http://127.0.0.\u00011:23815",
    "http://127.0.0.1\u0000:23815",
    "http://ho\tst:2380",
    "http://h\u007fst:2380",
    "http://bücher.example:2380",
    "http://ho_st:2380",
    "http://-host:2380",
    "http://host-:2380",
    "http://host..example:2380",
    "http://host.:2380",
    "http://:2380",
    "http://[::1%25eth0]:2380",
    "http://[::g]:2380",
    "http://[1:2:3:4:5:6:7:8:9]:2380",
    "http://::1:2380",
    "http://u:p@127.0.0.1:2380",
    "http://@127.0.0.1:2380",
    "http://127.0.0.1:2380/etcd",
    "http://127.0.0.1:2380//",
    "http://127.0.0.1:2380?x=1",
    "http://127.0.0.1:2380#f",
    "http://127.0.0.1:2380\\",
    "unix://127.0.0.1:2380",
    "ftp://127.0.0.1:2380",
    "",
  ])("refuses %j", (input) => {
    const r = parsePeerUrl(input);
    expect(r.ok).toBe(false);
    expect(peerUrlProblem(input)).toEqual(expect.any(String));
  });

  const label = fc.stringMatching(/^[a-zA-Z0-9]([a-zA-Z0-9-]{0,10}[a-zA-Z0-9])?$/).filter((l) => !/^[0-9]+$/.test(l) && !/^0x[0-9a-f]*$/i.test(l));
  const host = fc.oneof(
    fc.array(label, { minLength: 1, maxLength: 4 }).map((ls) => ls.join(".")),
    fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255)).map((o) => o.join(".")),
    fc.array(fc.nat(0xffff), { minLength: 8, maxLength: 8 }).map((g) => `[${g.map((n) => n.toString(16)).join(":")}]`),
  );
  const url = fc
    .tuple(fc.constantFrom("http", "https", "HTTP", "Https"), host, fc.integer({ min: 1, max: 65535 }), fc.constantFrom("", "/"))
    .map(([s, h, p, slash]) => `${s}://${h}:${p}${slash}`);

  it("canonical form is a fixed point: parse(canonical) is canonical", () => {
    fc.assert(
      fc.property(url, (u) => {
        const r = parsePeerUrl(u);
        if (!r.ok) throw new Error(`${u}: ${r.problem}`);
        const again = parsePeerUrl(r.value.canonical);
        expect(again).toEqual(r);
        // The canonical form is also what a WHATWG URL parser makes of it: no second spelling.
        const whatwg = new URL(r.value.canonical);
        expect(whatwg.hostname).toBe(r.value.host);
        expect(Number(whatwg.port || (r.value.scheme === "http" ? 80 : 443))).toBe(r.value.port);
      }),
      { numRuns: 500 },
    );
  });

  it("any string either fails or parses to a canonical form that is a fixed point", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          url.chain((u) => fc.nat(u.length).chain((i) => fc.string({ maxLength: 3 }).map((s) => u.slice(0, i) + s + u.slice(i)))),
        ),
        (s) => {
          const r = parsePeerUrl(s);
          if (!r.ok) return;
          expect(parsePeerUrl(r.value.canonical)).toEqual(r);
          expect(r.value.canonical).toMatch(/^https?:\/\/(\[[0-9a-f:]+\]|[a-z0-9.-]+):[1-9][0-9]*$/);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it("compresses IPv6 as RFC 5952 does", () => {
    expect(canonicalIpv6("2001:db8:0:0:1:0:0:1")).toBe("2001:db8::1:0:0:1");
    expect(canonicalIpv6("2001:0db8:0000:0000:0000:0000:0002:0001")).toBe("2001:db8::2:1");
    expect(canonicalIpv6("1:0:1:1:1:1:1:1")).toBe("1:0:1:1:1:1:1:1");
    expect(canonicalIpv6("::")).toBe("::");
  });
});
