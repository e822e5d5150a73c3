/**
 * Peer URLs are stored, signed and compared in one canonical spelling: two spellings of one
 * address are one ticket, never two, and the admission token carries the canonical one.
 */
import { decodeJwt } from "jose";
import { describe, expect, it } from "vitest";
import { admin, bootstrapped, enroll, ticket } from "./helpers.ts";

describe("canonical peer URLs", () => {
  it("stores and signs the canonical form, and finds the ticket again under another spelling", async () => {
    const C = "peer-canon";
    await enroll(C);
    const { enrollment } = await bootstrapped(`${C}-b`);
    const first = await ticket(`${C}-b`, enrollment, "n1", "HTTPS://Ctrl-1.Example:2380/");
    expect(first.status).toBe(201);
    expect(first.body.peerURL).toBe("https://ctrl-1.example:2380");
    expect(decodeJwt(first.body.admission).peer_url).toBe("https://ctrl-1.example:2380");
    const again = await ticket(`${C}-b`, enrollment, "n1", "https://ctrl-1.example:2380");
    expect({ status: again.status, ticket: again.body.ticket }).toEqual({ status: 200, ticket: first.body.ticket });
    const conflict = await ticket(`${C}-b`, enrollment, "n1", "https://ctrl-1.example:2381");
    expect({ status: conflict.status, code: conflict.body.code }).toEqual({ status: 409, code: "peer_url_conflict" });
  });

  it("adopts members under their canonical peer URLs", async () => {
    const r = await admin("POST", "peer-canon-adopt/adopt", { members: [{ node: "m1", peerURL: "HTTP://[2001:DB8:0:0::1]:2380/" }] });
    expect(r.status).toBe(200);
    expect(r.body.members).toEqual([expect.objectContaining({ node: "m1", peerURL: "http://[2001:db8::1]:2380" })]);
  });
});
