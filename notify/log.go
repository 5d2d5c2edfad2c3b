package notify

import (
	"context"
	"log/slog"
)

// Log is the notifier that writes one structured log line per event. The
// zero value is not usable; build it with NewLog.
type Log struct {
	logger *slog.Logger
}

// NewLog returns a notifier writing to logger.
func NewLog(logger *slog.Logger) *Log { return &Log{logger: logger} }

// Name implements Named.
func (*Log) Name() string { return "log" }

// Notify logs e: error for sync-failed; warn for prune-failed,
// resources-pruned, live-drift-detected and drift-converged; info otherwise.
// swarm, revision, message and actor appear only when non-empty.
func (l *Log) Notify(ctx context.Context, e Event) {
	attrs := []slog.Attr{
		slog.String("app", e.Application),
		slog.String("type", string(e.Type)),
	}
	for _, kv := range [][2]string{{"swarm", e.Swarm}, {"revision", e.Revision}, {"message", e.Message}, {"actor", e.Actor},
		{"cause", e.Cause}, {"shared", e.Shared}} {
		if kv[1] != "" {
			attrs = append(attrs, slog.String(kv[0], kv[1]))
		}
	}
	l.logger.LogAttrs(ctx, Level(e.Type), "event", attrs...)
}

// Level is the log level an event of type t is written at.
func Level(t EventType) slog.Level {
	switch t {
	case SyncFailed, SwarmUnreachable, ReleaseRolledBack, IncidentOpened, CanaryAborted:
		return slog.LevelError
	case PruneFailed, ResourcesPruned, LiveDriftDetected, DriftConverged, SelfUpdateIssued, TasksRebalanced:
		return slog.LevelWarn
	default:
		return slog.LevelInfo
	}
}
