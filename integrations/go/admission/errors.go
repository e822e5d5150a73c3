package admission

import "fmt"

// Code says why an admission token was refused. The codes and their HTTP statuses are the same
// as the TypeScript verifier's (src/shared/verifier/errors.ts) and the join API's problem codes.
type Code string

const (
	// InvalidToken (401): malformed, wrong algorithm, bad signature, wrong typ/iss/aud/cluster,
	// a missing claim, or a token the broker does not know.
	InvalidToken Code = "invalid_token"
	// UnknownKey (401): no key in the cluster's JWKS has the token's kid, even after a refetch.
	UnknownKey Code = "unknown_key"
	// TokenNotYetValid (401): nbf (or iat) is in the future beyond the clock skew.
	TokenNotYetValid Code = "token_not_yet_valid"
	// WrongNode (403): a valid token for another node (sub).
	WrongNode Code = "wrong_node"
	// WrongPeerURL (403): a valid token for another peer URL (peer_url).
	WrongPeerURL Code = "wrong_peer_url"
	// WrongRole (403): a valid token with a role this call does not accept.
	WrongRole Code = "wrong_role"
	// TokenExpired (410): exp has passed (by our clock, or the broker says so).
	TokenExpired Code = "token_expired"
	// AdmissionRevoked (410): an administrator revoked the admission.
	AdmissionRevoked Code = "admission_revoked"
	// AdmissionCompleted (410): the admission was used: its node joined.
	AdmissionCompleted Code = "admission_completed"
	// AdmissionInactive (410): abandoned, or superseded by a newer admission of the same ticket.
	AdmissionInactive Code = "admission_inactive"
	// BrokerUnavailable (503): the broker could not be asked and no usable revocation list was at hand.
	BrokerUnavailable Code = "broker_unavailable"
)

// Codes lists every code, in the order above.
var Codes = []Code{InvalidToken, UnknownKey, TokenNotYetValid, WrongNode, WrongPeerURL, WrongRole, TokenExpired, AdmissionRevoked, AdmissionCompleted, AdmissionInactive, BrokerUnavailable}

// Status is the HTTP status a join API answers with for this code: 401 not a valid admission
// token, 403 valid but for another node, peer or role, 410 it was valid and no longer is, 503
// the verifier cannot decide now.
func (c Code) Status() int {
	switch c {
	case InvalidToken, UnknownKey, TokenNotYetValid:
		return 401
	case WrongNode, WrongPeerURL, WrongRole:
		return 403
	case TokenExpired, AdmissionRevoked, AdmissionCompleted, AdmissionInactive:
		return 410
	default:
		return 503
	}
}

// Error is every refusal Verify returns. Decide by Code (or errors.Is with the Err… values),
// never by Message.
type Error struct {
	Code Code
	// Message is for people: it names what was wrong.
	Message string
	// Reason is finer and log-friendly: a claim name, an introspection reason, "jwks", …
	Reason string
	// Err is the underlying failure, if any (a network error, a go-jose error).
	Err error
}

// Status is Code.Status().
func (e *Error) Status() int { return e.Code.Status() }

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

func (e *Error) Unwrap() error { return e.Err }

// Is matches another *Error with the same Code, so errors.Is(err, admission.ErrWrongNode) works.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && t.Message == "" && t.Err == nil
}

// Values to compare with errors.Is.
var (
	ErrInvalidToken       = &Error{Code: InvalidToken}
	ErrUnknownKey         = &Error{Code: UnknownKey}
	ErrTokenNotYetValid   = &Error{Code: TokenNotYetValid}
	ErrWrongNode          = &Error{Code: WrongNode}
	ErrWrongPeerURL       = &Error{Code: WrongPeerURL}
	ErrWrongRole          = &Error{Code: WrongRole}
	ErrTokenExpired       = &Error{Code: TokenExpired}
	ErrAdmissionRevoked   = &Error{Code: AdmissionRevoked}
	ErrAdmissionCompleted = &Error{Code: AdmissionCompleted}
	ErrAdmissionInactive  = &Error{Code: AdmissionInactive}
	ErrBrokerUnavailable  = &Error{Code: BrokerUnavailable}
)

func refuse(code Code, reason string, err error, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Reason: reason, Err: err}
}

// inactive maps an introspection reason (or a revocation list entry's reason) to its error.
func inactive(reason, jti string) *Error {
	switch reason {
	case "revoked":
		return refuse(AdmissionRevoked, reason, nil, "admission %s was revoked", jti)
	case "completed":
		return refuse(AdmissionCompleted, reason, nil, "admission %s was already used: its node joined", jti)
	case "expired":
		return refuse(TokenExpired, reason, nil, "admission %s has expired", jti)
	case "abandoned", "superseded":
		return refuse(AdmissionInactive, reason, nil, "admission %s is no longer active (%s)", jti, reason)
	default:
		// invalid, unknown, unknown_cluster: the broker does not recognise it as one of its admissions.
		return refuse(InvalidToken, reason, nil, "the broker does not know admission %s as active (%s)", jti, reason)
	}
}
