package listener

// Reasons the listener refuses a connection or request: the reason label of
// metrics.ListenerRejected, and the body of a refusal.
const (
	// ReasonTLSHandshake: no or an untrusted client certificate, or not TLS
	// 1.3; the connection never reaches HTTP.
	ReasonTLSHandshake = "tls_handshake"
	// ReasonCertificateExpired: the certificate expired while its connection
	// was open.
	ReasonCertificateExpired = "certificate_expired"
	// ReasonUnknownRuntime: no Kyma carries the certificate's runtime id (for
	// example its Kyma was deleted).
	ReasonUnknownRuntime = "unknown_runtime"
	// ReasonRuntimeMismatch: the report names a Kyma of another runtime.
	ReasonRuntimeMismatch = "runtime_mismatch"
	// ReasonTooLarge: the body is over the size limit.
	ReasonTooLarge = "too_large"
	// ReasonMalformed: the body is not a valid report.
	ReasonMalformed = "malformed"
	// ReasonBusy: the Kyma work queue did not take the report in time; the
	// agent retries.
	ReasonBusy = "busy"
	// ReasonLookup: the Kymas could not be read; the agent retries.
	ReasonLookup = "lookup_failed"
	// ReasonRateLimited: the runtime is over its report rate (429 with
	// Retry-After); the agent retries then.
	ReasonRateLimited = "rate_limited"
)

// reasons are all of the above; New sets each one's counter to zero, so that
// an alert on the rate of refusals (config/prometheus) sees the series
// before the first refusal.
var reasons = []string{
	ReasonTLSHandshake, ReasonCertificateExpired, ReasonUnknownRuntime, ReasonRuntimeMismatch,
	ReasonTooLarge, ReasonMalformed, ReasonBusy, ReasonLookup, ReasonRateLimited,
}
