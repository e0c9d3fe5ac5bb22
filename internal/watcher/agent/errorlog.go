package agent

import (
	"log"
	"strings"

	"github.com/go-logr/logr"
)

// newErrorLog routes net/http's server errors (TLS handshake failures, bad
// requests) into the structured log instead of stderr.
func newErrorLog(l logr.Logger) *log.Logger {
	return log.New(logWriter{l}, "", 0)
}

type logWriter struct{ log logr.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.V(1).Info(strings.TrimSpace(string(p)))
	return len(p), nil
}
