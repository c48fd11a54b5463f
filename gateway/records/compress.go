package records

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// xerialMagic starts the snappy framing written by Java clients.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const (
	xerialHeaderLen = 16 // magic, version int32, compatible-version int32
	xerialBlockSize = 32 << 10

	// maxZstdWindow bounds the history a zstd frame can make a decoder
	// allocate, independently of its output. 8 MiB covers every standard
	// level (above that only --ultra); Java and librdkafka at their
	// default level 3 use 2 MiB or less.
	maxZstdWindow = 8 << 20
)

// Decoders are pooled with the bytes.Reader feeding them: they are costly
// to create (zstd especially) and Validate is on the produce hot path.
type gzipDecoder struct {
	r   gzip.Reader
	src bytes.Reader
}

type lz4Decoder struct {
	r   *lz4.Reader
	src bytes.Reader
}

type zstdDecoder struct {
	d   *zstd.Decoder
	src bytes.Reader
}

var (
	gzipPool = sync.Pool{New: func() any { return new(gzipDecoder) }}
	lz4Pool  = sync.Pool{New: func() any { return &lz4Decoder{r: lz4.NewReader(nil)} }}
	zstdPool = sync.Pool{New: func() any {
		// Concurrency 1 decodes synchronously: no goroutines to leak
		// when the pool drops a decoder without Close.
		d, err := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(maxZstdWindow),
		)
		if err != nil {
			panic(err) // constant options
		}
		return &zstdDecoder{d: d}
	}}
)

// decompress appends src decoded with codec c to dst. It fails with
// ErrTooLarge once the output would exceed limit bytes, never growing dst
// beyond that, and with ErrCorrupt on undecodable input.
func decompress(c Codec, src, dst []byte, limit int) ([]byte, error) {
	switch c {
	case Gzip:
		g := gzipPool.Get().(*gzipDecoder)
		defer func() { g.src.Reset(nil); gzipPool.Put(g) }()
		g.src.Reset(src)
		if err := g.r.Reset(&g.src); err != nil {
			return dst, corruptf(c, err)
		}
		// The trailer's ISIZE is the (last member's) size: only a hint, so
		// bound it by deflate's best ratio (~1032:1) lest a lie make us
		// allocate the whole limit for a tiny payload.
		hint := 0
		if len(src) >= 4 {
			hint = min(int(binary.LittleEndian.Uint32(src[len(src)-4:])), 1032*len(src))
		}
		return readCapped(c, &g.r, dst, limit, hint)
	case Snappy:
		if len(src) >= len(xerialMagic) && bytes.Equal(src[:len(xerialMagic)], xerialMagic) {
			return decodeXerial(src, dst, limit)
		}
		return decodeSnappyBlock(src, dst, limit)
	case LZ4:
		l := lz4Pool.Get().(*lz4Decoder)
		defer func() { l.r.Reset(nil); l.src.Reset(nil); lz4Pool.Put(l) }()
		l.src.Reset(src)
		l.r.Reset(&l.src)
		return readCapped(c, l.r, dst, limit, 0)
	case Zstd:
		z := zstdPool.Get().(*zstdDecoder)
		defer func() { z.src.Reset(nil); zstdPool.Put(z) }()
		z.src.Reset(src)
		if err := z.d.Reset(&z.src); err != nil {
			return dst, corruptf(c, err)
		}
		return readCapped(c, z.d, dst, limit, 0)
	case None:
		if len(src) > limit {
			return dst, tooLarge(c, limit)
		}
		return append(dst, src...), nil
	}
	return dst, fmt.Errorf("%w: codec %d", ErrUnsupportedCompression, c)
}

// readCapped appends everything r yields to dst, allocating at most limit
// bytes beyond len(dst): a zip bomb or a lying size field fails with
// ErrTooLarge once the limit is reached, before anything larger exists.
func readCapped(c Codec, r io.Reader, dst []byte, limit, hint int) ([]byte, error) {
	start := len(dst)
	end := start + limit
	if hint <= 0 {
		hint = 64 << 10
	}
	dst = grow(dst, min(hint, limit), end)
	for {
		stop := min(cap(dst), end)
		if len(dst) == stop {
			if stop == end {
				// At the limit: any further byte is one too many.
				var probe [1]byte
				n, err := io.ReadFull(r, probe[:])
				switch {
				case n > 0:
					return dst, tooLarge(c, limit)
				case err == io.EOF:
					return dst, nil
				default:
					return dst, corruptf(c, err)
				}
			}
			// Double what we have, within the limit.
			dst = grow(dst, min(max(len(dst)-start, 64<<10), end-len(dst)), end)
			stop = min(cap(dst), end)
		}
		n, err := r.Read(dst[len(dst):stop])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
				return dst, fmt.Errorf("%w: zstd window over %d bytes: %v", ErrTooLarge, maxZstdWindow, err)
			}
			return dst, corruptf(c, err)
		}
	}
}

// grow makes room for n more bytes, doubling for amortized growth but
// never beyond capacity maxCap (>= len(b)+n).
func grow(b []byte, n, maxCap int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := make([]byte, len(b), min(max(len(b)+n, 2*cap(b)), maxCap))
	copy(nb, b)
	return nb
}

// decodeSnappyBlock decodes one raw snappy block (librdkafka, franz-go).
// The block states its decoded length, so it is checked before allocating.
func decodeSnappyBlock(src, dst []byte, limit int) ([]byte, error) {
	n, err := snappy.DecodedLen(src)
	if err != nil {
		return dst, corruptf(Snappy, err)
	}
	if n > limit {
		return dst, tooLarge(Snappy, limit)
	}
	dst = grow(dst, n, len(dst)+n)
	return decodeSnappyInto(src, dst, n)
}

// decodeSnappyInto decodes a block of decoded length n into dst's spare
// capacity. Strict: we reject the s2 extensions Kafka's Java decoder would
// not accept, so we never admit data consumers cannot read.
func decodeSnappyInto(src, dst []byte, n int) ([]byte, error) {
	start := len(dst)
	out, err := snappy.DecodeStrict(dst[start:start+n], src)
	if err != nil {
		return dst, corruptf(Snappy, err)
	}
	if len(out) != n { // cannot happen: both read the same length prefix
		return dst, corruptf(Snappy, errors.New("decoded length mismatch"))
	}
	return dst[:start+n], nil
}

// decodeXerial decodes xerial framing (Java clients): a 16-byte header,
// then blocks each prefixed by a big-endian int32 length. A first pass sums
// the blocks' declared sizes, so a bomb fails before any decoding and the
// output is allocated once.
func decodeXerial(src, dst []byte, limit int) ([]byte, error) {
	if len(src) < xerialHeaderLen {
		return dst, corruptf(Snappy, errors.New("truncated xerial header"))
	}
	src = src[xerialHeaderLen:]
	total := 0
	for rem := src; len(rem) > 0; {
		block, next, err := xerialBlock(rem)
		if err != nil {
			return dst, err
		}
		n, err := snappy.DecodedLen(block)
		if err != nil {
			return dst, corruptf(Snappy, err)
		}
		if n > limit-total {
			return dst, tooLarge(Snappy, limit)
		}
		total += n
		rem = next
	}
	dst = grow(dst, total, len(dst)+total)
	for len(src) > 0 {
		block, next, _ := xerialBlock(src)
		n, _ := snappy.DecodedLen(block)
		var err error
		if dst, err = decodeSnappyInto(block, dst, n); err != nil {
			return dst, err
		}
		src = next
	}
	return dst, nil
}

// xerialBlock splits the next length-prefixed block off b.
func xerialBlock(b []byte) (block, rest []byte, err error) {
	if len(b) < 4 {
		return nil, nil, corruptf(Snappy, errors.New("truncated xerial block length"))
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return nil, nil, corruptf(Snappy, fmt.Errorf("xerial block length %d exceeds the %d bytes left", n, len(b)-4))
	}
	return b[4 : 4+n], b[4+n:], nil
}

func corruptf(c Codec, err error) error {
	return fmt.Errorf("%w: %s decompression: %v", ErrCorrupt, c, err)
}

func tooLarge(c Codec, limit int) error {
	return fmt.Errorf("%w: %s payload decompresses to more than %d bytes", ErrTooLarge, c, limit)
}

// compress encodes src with codec c for Builder.
func compress(c Codec, src []byte) ([]byte, error) {
	switch c {
	case None:
		return src, nil
	case Gzip:
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		if _, err := w.Write(src); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case Snappy:
		// xerial framing, as the Java producer writes.
		out := append([]byte(nil), xerialMagic...)
		out = binary.BigEndian.AppendUint32(out, 1) // version
		out = binary.BigEndian.AppendUint32(out, 1) // min compatible version
		for len(src) > 0 {
			n := min(len(src), xerialBlockSize)
			block := snappy.Encode(nil, src[:n])
			out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
			out = append(out, block...)
			src = src[n:]
		}
		return out, nil
	case LZ4:
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		// 64 KiB independent blocks, as the Java producer writes.
		if err := w.Apply(lz4.BlockSizeOption(lz4.Block64Kb)); err != nil {
			return nil, err
		}
		if _, err := w.Write(src); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case Zstd:
		return zstdEncoder().EncodeAll(src, nil), nil
	}
	return nil, fmt.Errorf("%w: codec %d", ErrUnsupportedCompression, c)
}

// zstdEncoder is shared: EncodeAll is safe for concurrent use.
var zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		panic(err) // constant options
	}
	return e
})
