package main

import (
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
)

// kgoLogger routes the Kafka client's logs to slog: warnings and errors
// always, info and debug with -v.
type kgoLogger struct {
	log     *slog.Logger
	verbose bool
	debug   bool // the client's debug logs too
}

func (l kgoLogger) Level() kgo.LogLevel {
	if l.debug {
		return kgo.LogLevelDebug
	}
	if l.verbose {
		return kgo.LogLevelInfo
	}
	return kgo.LogLevelWarn
}

func (l kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	var lvl slog.Level
	switch level {
	case kgo.LogLevelError:
		lvl = slog.LevelError
	case kgo.LogLevelWarn:
		lvl = slog.LevelWarn
	case kgo.LogLevelInfo:
		lvl = slog.LevelInfo
	default:
		lvl = slog.LevelDebug
	}
	l.log.Log(context.Background(), lvl, msg, keyvals...)
}
