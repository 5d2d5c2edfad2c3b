package reconcile

import (
	"errors"
)

// Errors the controller's requests wrap, so a caller (the API) can choose
// its answer with errors.Is.
var (
	// ErrUnknownApplication: the running app set has no such application.
	ErrUnknownApplication = errors.New("unknown application")
	// ErrNotRecorded: the swarm holds no record of the release or revision
	// a request names.
	ErrNotRecorded = errors.New("not recorded")
	// ErrInvalidRequest: the request cannot be acted on as given (a
	// revision git does not know, a revision number below 1).
	ErrInvalidRequest = errors.New("invalid request")
	// ErrUnavailable: the swarm or the app set cannot answer now.
	ErrUnavailable = errors.New("unavailable")
	// ErrSyncWindow: a sync window refuses the request now (manualSync:
	// false); it may pass once the window closes.
	ErrSyncWindow = errors.New("refused by a sync window")
	// ErrNoCanary: a promotion or an abort names an application whose
	// release runs no canary now.
	ErrNoCanary = errors.New("no canary runs")
)
