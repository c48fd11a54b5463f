//go:build unix

package embedded

import "syscall"

// diskSpace returns the size and the free space (for unprivileged users) of
// the file system holding path, or -1s when it cannot tell.
func diskSpace(path string) (total, usable int64) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return -1, -1
	}
	return int64(st.Blocks) * int64(st.Bsize), int64(st.Bavail) * int64(st.Bsize)
}
