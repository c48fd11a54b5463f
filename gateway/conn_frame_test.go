package gateway

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// TestReadFrameBody: a frame body comes back whole whatever the read
// sizes, and a short one is an error.
func TestReadFrameBody(t *testing.T) {
	for _, size := range []int{8, frameChunk - 1, frameChunk, frameChunk + 1, 5*frameChunk + 3, 1 << 20} {
		want := make([]byte, size)
		for i := range want {
			want[i] = byte(i * 7)
		}
		for _, r := range []io.Reader{bytes.NewReader(want), iotest.OneByteReader(bytes.NewReader(want)), iotest.HalfReader(bytes.NewReader(want))} {
			got, err := readFrameBody(r, size)
			if err != nil || !bytes.Equal(got, want) || cap(got) != size {
				t.Fatalf("size %d: err %v, equal %v, cap %d", size, err, bytes.Equal(got, want), cap(got))
			}
		}
		if _, err := readFrameBody(bytes.NewReader(want[:size-1]), size); !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			t.Fatalf("size %d short by one: %v", size, err)
		}
	}
}

// BenchmarkReadFrameBody: allocations to read one 1 MiB produce frame.
func BenchmarkReadFrameBody(b *testing.B) {
	frame := make([]byte, 1<<20)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := readFrameBody(bytes.NewReader(frame), len(frame)); err != nil {
			b.Fatal(err)
		}
	}
}
