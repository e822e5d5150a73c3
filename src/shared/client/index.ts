/**
 * The typed broker client: `new BrokerClient({ baseUrl, bearer }).admin("prod-eu").status()`.
 * @module
 */
export { AdminClient, BrokerClient, ClusterClient, checkEnrollmentTokenInput } from "./broker-client.ts";
export type { AdminCredentialInput, AdoptInput, AuditInput, BootstrapInput, EnrollmentTokenInput, PolicyInput, TicketListInput } from "./broker-client.ts";
export { BrokerProblem, BrokerUnreachable, InvalidInput, type ProblemBody } from "./errors.ts";
export type { Reply, TransportOptions } from "./transport.ts";
export { NodeSession } from "./node-session.ts";
export { TransportError, describeAnswer, requestJson, type HttpResult } from "./exchange.ts";
export type * from "../protocol/wire.ts";
