// Package version names the build of kgate that is running: the release
// version stamped at link time and what the Go toolchain recorded.
package version

import (
	"runtime"
	"runtime/debug"
)

// Version is the release version. Release builds set it with the linker
// flag -X github.com/kgate/kgate/internal/version.Version=v1.2.3. Without it, the module version Go recorded is used ("(devel)" for a
// build from a checkout), or "dev".
var Version = ""

// Commit is the VCS revision, set the same way when the toolchain cannot
// record it (a build with -buildvcs=false, or from a source tarball).
var Commit = ""

// Info describes the running binary.
type Info struct {
	Version    string `json:"version"`
	GoVersion  string `json:"go_version"`
	Commit     string `json:"commit"`      // VCS revision, "" when not built from a checkout
	CommitTime string `json:"commit_time"` // RFC 3339, "" when unknown
	Modified   bool   `json:"modified"`    // the checkout had uncommitted changes
}

// Get reads the build information of this binary.
func Get() Info {
	info := Info{Version: Version, GoVersion: runtime.Version(), Commit: Commit}
	bi, ok := debug.ReadBuildInfo()
	if ok {
		if info.Version == "" && bi.Main.Version != "" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if info.Commit == "" {
					info.Commit = s.Value
				}
			case "vcs.time":
				info.CommitTime = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
	}
	if info.Version == "" {
		info.Version = "dev"
	}
	return info
}
