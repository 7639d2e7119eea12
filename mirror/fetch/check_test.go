package fetch

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"testing"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// BenchmarkCheckStagedArchive is the check of a downloaded archive
// before it is released to its clients (verify.CheckArchive, the h1 of
// its files), read from the staged bytes: a 64 MiB zip of one provider
// executable (about 100 MiB unpacked), read through a cache.Follower, as
// the fetcher reads it.
func BenchmarkCheckStagedArchive(b *testing.B) {
	var zipped bytes.Buffer
	zw := zip.NewWriter(&zipped)
	fw, err := zw.Create("terraform-provider-x_v1.0.0")
	if err != nil {
		b.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	block := make([]byte, 4096)
	for range 100 << 20 / len(block) {
		for j := range block {
			block[j] = byte(rnd.IntN(40)) // compresses about as a provider does
		}
		fw.Write(block)
	}
	if err := zw.Close(); err != nil {
		b.Fatal(err)
	}
	data := zipped.Bytes()
	sum := sha256.Sum256(data)
	s, err := cache.Open(cache.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	w, err := s.NewBlobWriter(hex.EncodeToString(sum[:]))
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	w.Write(data)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		r := w.Follow()
		if _, err := verify.CheckArchive(context.Background(), r, w.Written(), "x", verify.Limits{}); err != nil {
			b.Fatal(err)
		}
		r.Close()
	}
}
