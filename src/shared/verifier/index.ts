/**
 * The admission-token verifier for a controllers' join API (Node or Workers): import from here.
 * @module
 */
export { verifyAdmission, verifyAdmissionClaims, inactive, revocationListStatus, type VerifiedAdmission, type VerifyAdmissionOptions } from "./verify.ts";
export { ClusterTrust, BrokerUnreachableError, sharedClusterTrust, type ClusterTrustOptions, type IntrospectAnswer, type RevocationSnapshot } from "./trust.ts";
export {
  AdmissionError,
  ForbiddenAdmissionError,
  InactiveAdmissionError,
  InvalidAdmissionError,
  VerifierUnavailableError,
  type AdmissionErrorCode,
  type AdmissionErrorStatus,
} from "./errors.ts";
