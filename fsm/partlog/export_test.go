package partlog

import "os"

// SetWriteAt replaces how l writes its segment files.
func SetWriteAt(l *Log, fn func(f *os.File, b []byte, off int64) (int, error)) { l.writeAt = fn }
