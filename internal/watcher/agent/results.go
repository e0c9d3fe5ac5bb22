package agent

// Results of an admission request, the result label of
// metrics.Agent.AdmissionRequests.
const (
	ResultReported  = "reported"
	ResultUnchanged = "unchanged"
	ResultDryRun    = "dry_run"
	ResultIgnored   = "ignored"
	ResultMalformed = "malformed"
)

// Reasons a report failed or was dropped, the reason label of
// metrics.Agent.ReportFailures.
const (
	// ReasonUnreachable: no answer from the listener (connection, TLS,
	// timeout); retried.
	ReasonUnreachable = "unreachable"
	// ReasonServerError: the listener answered 5xx; retried.
	ReasonServerError = "server_error"
	// ReasonThrottled: the listener answered 429, the runtime is over its
	// rate limit; retried after the answer's Retry-After without using up an
	// attempt.
	ReasonThrottled = "throttled"
	// ReasonRejected: the listener refused the report (4xx); not retried,
	// since sending it again cannot change the answer.
	ReasonRejected = "rejected"
	// ReasonRetriesExhausted: dropped after the last attempt; the control
	// plane's periodic reconcile picks the change up instead.
	ReasonRetriesExhausted = "retries_exhausted"
	// ReasonTooLarge: the encoded report was over the size limit; dropped.
	ReasonTooLarge = "too_large"
	// ReasonQueueFull: too many objects waiting to be reported; dropped, so
	// that the agent's memory stays bounded.
	ReasonQueueFull = "queue_full"
	// ReasonNoCredentials: the client certificate is not loaded yet.
	ReasonNoCredentials = "no_credentials"
)
