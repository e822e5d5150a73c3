import { describe, expect, it } from "vitest";
import { readOnlyRefusal } from "./admin-auth.ts";

describe("readOnlyRefusal", () => {
  const everywhere = { readOnly: true as const, id: "jbc_a", cluster: null };
  const prod = { readOnly: true as const, id: "jbc_b", cluster: "prod" };

  it("lets the admin token do anything", () => {
    for (const method of ["GET", "POST", "PUT", "DELETE"]) expect(readOnlyRefusal({ readOnly: false }, method, "/v1/admin/credentials")).toBeNull();
  });

  it("refuses a read-only credential every method but GET and HEAD, and the credentials routes", () => {
    for (const method of ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"]) expect(readOnlyRefusal(everywhere, method, "/v1/admin/clusters/prod")).not.toBeNull();
    expect(readOnlyRefusal(everywhere, "GET", "/v1/admin/credentials")).not.toBeNull();
    expect(readOnlyRefusal(everywhere, "GET", "/v1/admin/credentials/jbc_x")).not.toBeNull();
    for (const path of ["/v1/admin/clusters", "/v1/admin/clusters/prod/audit", "/v1/admin/whoami"]) expect(readOnlyRefusal(everywhere, "GET", path)).toBeNull();
    expect(readOnlyRefusal(everywhere, "HEAD", "/v1/admin/clusters/prod/metrics")).toBeNull();
  });

  it("keeps one limited to a cluster to that cluster, however the name is encoded", () => {
    expect(readOnlyRefusal(prod, "GET", "/v1/admin/clusters/prod/metrics")).toBeNull();
    expect(readOnlyRefusal(prod, "GET", "/v1/admin/clusters/%70rod")).toBeNull();
    expect(readOnlyRefusal(prod, "GET", "/v1/admin/clusters")).toBeNull();
    for (const path of ["/v1/admin/clusters/staging", "/v1/admin/clusters/prod2", "/v1/admin/clusters/%E0%A4%A"])
      expect(readOnlyRefusal(prod, "GET", path)).not.toBeNull();
  });
});
