package cluster

import (
	"context"
	"io"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// hclogFor gives hashicorp/raft a logger that writes through log, so a
// node's log has one format (text or JSON) and one destination. Raft's
// elections, installed snapshots and configuration changes are logged at
// info, as Raft logs them: after a fault they are what tells who led which
// term with which log. Its routine info lines (its own snapshots and
// compactions, per-peer pipelines) go at debug; warnings and errors keep
// their level.
func hclogFor(log *slog.Logger, name string) hclog.Logger {
	l := hclog.NewInterceptLogger(&hclog.LoggerOptions{Name: name, Level: hclog.Off, Output: io.Discard})
	l.RegisterSink(slogSink{log: log})
	return l
}

type slogSink struct{ log *slog.Logger }

func (s slogSink) Accept(name string, level hclog.Level, msg string, args ...any) {
	var lvl slog.Level
	switch {
	case level >= hclog.Error:
		lvl = slog.LevelError
	case level == hclog.Warn:
		lvl = slog.LevelWarn
	case level == hclog.Info && !routine[msg]:
		lvl = slog.LevelInfo
	default:
		lvl = slog.LevelDebug
	}
	ctx := context.Background()
	if !s.log.Enabled(ctx, lvl) {
		return
	}
	attrs := make([]any, 0, len(args)+2)
	attrs = append(attrs, "part", name)
	for i := 0; i+1 < len(args); i += 2 {
		key, ok := args[i].(string)
		if !ok {
			key = "arg"
		}
		v := args[i+1]
		if err, ok := v.(error); ok {
			v = err.Error()
		}
		attrs = append(attrs, key, v)
	}
	s.log.Log(ctx, lvl, msg, attrs...)
}

// routine are Raft's info lines that come with every snapshot or
// replication stream: at debug.
var routine = map[string]bool{
	"starting snapshot up to": true, "snapshot complete up to": true, "creating new snapshot": true,
	"compacting logs": true, "no logs to truncate": true, "reaping snapshot": true,
	"pipelining replication": true, "aborting pipeline replication": true,
}
