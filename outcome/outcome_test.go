package outcome

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestOfClassesByTheWrappedErrorType(t *testing.T) {
	base := errors.New("boom")
	for _, tc := range []struct {
		name string
		err  error
		want Class
	}{
		{"nil is ok", nil, OK},
		{"an unclassified error is transient", base, Transient},
		{"a stalled error is stalled", &StalledError{Err: base}, Stalled},
		{"a wrapped stalled error is stalled", fmt.Errorf("render: %w", &StalledError{Err: base}), Stalled},
		{"a waiting error is waiting", &WaitingError{Err: base, Retry: time.Second}, Waiting},
		{"a transient error is transient", &TransientError{Err: base}, Transient},
		{"stalled wins over a waiting error it wraps", &StalledError{Err: &WaitingError{Err: base}}, Stalled},
		{"stalled inside a join is stalled", errors.Join(base, &StalledError{Err: base}), Stalled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Of(tc.err); got != tc.want {
				t.Errorf("Of(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}

func TestErrorTypesKeepTheirCause(t *testing.T) {
	base := errors.New("cause")
	for _, err := range []error{&StalledError{Err: base}, &WaitingError{Err: base}, &TransientError{Err: base}} {
		if !errors.Is(err, base) || err.Error() != "cause" {
			t.Errorf("%T: Is(cause) = %t, Error() = %q; want true and the cause's text", err, errors.Is(err, base), err.Error())
		}
	}
}

func TestRetryAfterReadsTheWaitingDelay(t *testing.T) {
	err := fmt.Errorf("gate: %w", &WaitingError{Err: errors.New("rollout"), Retry: 5 * time.Second})
	if got := RetryAfter(err); got != 5*time.Second {
		t.Errorf("RetryAfter = %s, want 5s", got)
	}
	if got := RetryAfter(errors.New("plain")); got != 0 {
		t.Errorf("RetryAfter(plain) = %s, want 0", got)
	}
}
