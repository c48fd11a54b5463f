package main

import "testing"

// A librdkafka member that ended its group session on its own clock (the
// consumer program's session-timeout event) counts as a session the client
// ended, as franz-go's do, so the report shows it apart from rounds the
// cluster's answers changed; before the group first settles it does not.
func TestProgramSessionTimeoutCountsAsClientEnded(t *testing.T) {
	f := &failover{sessionErrs: map[string]int64{}, fetchErr: map[string]int64{}}
	p := &consumerProgram{}
	f.onProgramEvent(0, p, programEvent{Event: "session-timeout", Message: "Consumer group session timed out"})
	if n := sum(f.sessionErrs); n != 0 {
		t.Fatalf("counted %d before counting started", n)
	}
	f.counting = true
	f.onProgramEvent(0, p, programEvent{Event: "session-timeout", Message: "Consumer group session timed out"})
	f.onProgramEvent(1, p, programEvent{Event: "error", Where: "error_cb", Name: "_TRANSPORT"})
	if n := sum(f.sessionErrs); n != 1 {
		t.Fatalf("client-ended sessions %v, want 1", f.sessionErrs)
	}
}
