package gateway_test

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Transactional produce beside idempotent produce on one node: each
// iteration is 100 records of 1 KiB, as one committed transaction or as
// one idempotent flush.
func BenchmarkProduce100x1KiB(b *testing.B) {
	value := make([]byte, 1024)
	for _, bc := range []struct {
		name string
		txn  bool
	}{{"idempotent", false}, {"transaction", true}} {
		b.Run(bc.name, func(b *testing.B) {
			n := startNodeWith(b, nil, true)
			createTopic(b, n.addr, "bench", 1, nil)
			opts := []kgo.Opt{kgo.DefaultProduceTopic("bench"), kgo.ProducerLinger(0)}
			if bc.txn {
				opts = append(opts, kgo.TransactionalID("bench-tx"))
			}
			cl := newClient(b, n.addr, opts...)
			ctx := context.Background()
			b.SetBytes(100 * 1024)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if bc.txn {
					if err := cl.BeginTransaction(); err != nil {
						b.Fatal(err)
					}
				}
				for j := 0; j < 100; j++ {
					cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
						if err != nil {
							b.Error(err)
						}
					})
				}
				if err := cl.Flush(ctx); err != nil {
					b.Fatal(err)
				}
				if bc.txn {
					if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
