package modsource

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"slices"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
)

// errPackDelta is a delta of a received pack whose base the pack does not
// hold (a thin pack, which the fetch does not ask for), or that does not
// apply to it.
var errPackDelta = errors.New("a delta whose base the pack does not hold")

// packNode is one object of a received pack while indexPack indexes it.
type packNode struct {
	offset   int64 // in the received pack
	size     int64 // declared: the object's, or the delta's own
	typ      plumbing.ObjectType
	delta    bool
	done     bool // hash and typ are the object's (a delta's once made)
	hash     plumbing.Hash
	ref      plumbing.Hash // a reference delta's base
	children []int         // the deltas made from this object
	weight   int           // the objects of its delta tree: itself and its deltas'
}

// indexPack writes the objects of the pack in spool (whole, received
// within the download limit, and within bounds: checkPack) to fs, the
// Git directory of a storage, as a pack of whole objects (none a delta)
// and its index, for go-git to read the package from.
//
// It takes the place of go-git's indexing (its PackWriter), which keeps
// up to 96 MiB of delta bases in a cache it sets itself: whatever the
// limits, a pack of small deltas in long chains made it hold that much.
// This holds few objects at once: each object whole while the deltas
// made from it are made (each made once); of the deltas made from one
// object, it makes the one with the most deltas made from it in turn
// last, dropping the base first, so it holds a base besides only while
// it makes at most half of the objects that follow from it: for offset
// deltas, at most some log2 of the pack's objects at once (reference
// deltas on deltas, which Git sends to a client that does not take
// offset deltas, are weighed as far as they are known), their declared
// sizes within bounds.total in any case. The pack it writes holds the
// whole objects as received and the deltas made whole (compressed
// again: no more on disk than their declared sizes, and a few bytes
// each), so go-git reads each object once, whatever its cache keeps: a
// delta of a chain read through a small cache took go-git as many
// patches as its depth (up to 4,095).
func indexPack(ctx context.Context, spool *os.File, fs billy.Filesystem) error {
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return err
	}
	s := packfile.NewScanner(spool)
	_, count, err := s.Header()
	if err != nil {
		return err
	}
	if err := fs.MkdirAll("objects/pack", 0o755); err != nil {
		return err
	}
	f, err := fs.TempFile("objects/pack", "tmp_pack_")
	if err != nil {
		return err
	}
	defer func() {
		f.Close()
		fs.Remove(f.Name())
	}()
	out := newPackOut(f)
	out.header(count)

	ix := &packIndexer{s: s, out: out, idx: new(idxfile.Writer)}
	nodes := make([]packNode, 0, min(count, 1<<16))
	byOffset := make(map[int64]int, min(count, 1<<16))
	var refs []int
	// The objects: whole ones hashed, deltas known by their base.
	for i := range int(count) {
		if err := ctx.Err(); err != nil {
			return err
		}
		oh, err := s.NextObjectHeader()
		if err != nil {
			return err
		}
		n := packNode{offset: oh.Offset, size: oh.Length, typ: oh.Type}
		switch oh.Type {
		case plumbing.OFSDeltaObject:
			base, ok := byOffset[oh.OffsetReference]
			if !ok {
				return fmt.Errorf("%w: an offset delta at %d", errPackDelta, oh.Offset)
			}
			nodes[base].children = append(nodes[base].children, i)
			n.delta = true
		case plumbing.REFDeltaObject:
			n.delta, n.ref = true, oh.Reference
			refs = append(refs, i)
		}
		if n.delta {
			if _, _, err := s.NextObject(io.Discard); err != nil {
				return err
			}
		} else {
			hasher := plumbing.NewHasher(oh.Type, oh.Length)
			written, _, err := s.NextObject(hasher)
			if err != nil {
				return err
			}
			if written != oh.Length {
				return fmt.Errorf("%w: an object declaring %d bytes inflates to %d", packfile.ErrMalformedPackFile, oh.Length, written)
			}
			n.hash, n.done = hasher.Sum(), true
		}
		byOffset[oh.Offset] = i
		nodes = append(nodes, n)
	}
	if _, err := s.Checksum(); err != nil {
		return err
	}
	// The whole objects, copied as received: each ends where the next
	// begins, the last where the pack's checksum does.
	end, err := s.SeekFromStart(0)
	if err != nil {
		return err
	}
	end -= sha1.Size
	for i, n := range slices.Backward(nodes) {
		if !n.delta {
			off, crc, err := out.copy(io.NewSectionReader(spool, n.offset, end-n.offset))
			if err != nil {
				return err
			}
			ix.idx.Add(n.hash, uint64(off), crc)
		}
		end = nodes[i].offset
	}
	ix.nodes = nodes
	// Reference deltas wait for their base by its id: a whole object's
	// is known, a delta's once it is made.
	if len(refs) > 0 {
		ix.pending = map[plumbing.Hash][]int{}
		for _, i := range refs {
			ix.pending[nodes[i].ref] = append(ix.pending[nodes[i].ref], i)
		}
		for i := range nodes {
			ix.adopt(i)
		}
	}
	for i := range nodes {
		if !nodes[i].delta {
			ix.weigh(i)
		}
	}
	// The deltas, made from each whole object in turn.
	for i := range nodes {
		if nodes[i].delta || len(nodes[i].children) == 0 {
			continue
		}
		content, err := ix.read(i)
		if err != nil {
			return err
		}
		if err := ix.resolve(ctx, i, content); err != nil {
			return err
		}
	}
	for i := range nodes {
		if !nodes[i].done {
			return fmt.Errorf("%w: a reference delta at %d", errPackDelta, nodes[i].offset)
		}
	}
	sum, err := out.finish()
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	name := "objects/pack/pack-" + sum.String()
	if err := fs.Rename(f.Name(), name+".pack"); err != nil {
		return err
	}
	if err := ix.idx.OnFooter(sum); err != nil {
		return err
	}
	idx, err := ix.idx.Index()
	if err != nil {
		return err
	}
	w, err := fs.Create(name + ".idx")
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	if _, err := idxfile.NewEncoder(bw).Encode(idx); err != nil {
		w.Close()
		return err
	}
	if err := bw.Flush(); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// packIndexer makes the deltas of a received pack (indexPack).
type packIndexer struct {
	s       *packfile.Scanner
	out     *packOut
	idx     *idxfile.Writer
	nodes   []packNode
	pending map[plumbing.Hash][]int // reference deltas by their base's id
}

// adopt makes the reference deltas waiting for node i's id its children.
func (ix *packIndexer) adopt(i int) {
	n := &ix.nodes[i]
	if !n.done || ix.pending == nil {
		return
	}
	if kids, ok := ix.pending[n.hash]; ok {
		delete(ix.pending, n.hash)
		n.children = append(n.children, kids...)
		for _, k := range kids {
			ix.weigh(k)
		}
	}
}

// weigh sets the weight of node i's delta tree, as far as it is known
// (reference deltas whose base is a delta are known once it is made).
func (ix *packIndexer) weigh(i int) {
	order := []int{i}
	for k := 0; k < len(order); k++ {
		order = append(order, ix.nodes[order[k]].children...)
	}
	for _, j := range slices.Backward(order) {
		n := &ix.nodes[j]
		n.weight = 1
		for _, c := range n.children {
			n.weight += ix.nodes[c].weight
		}
	}
}

// read is the content of the whole object i, from the received pack.
func (ix *packIndexer) read(i int) ([]byte, error) {
	if _, err := ix.s.SeekObjectHeader(ix.nodes[i].offset); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Grow(int(min(ix.nodes[i].size, 1<<20)))
	if _, _, err := ix.s.NextObject(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// resolve makes and writes the deltas that follow from object i, whose
// content is given: a base's lighter deltas first, each with what follows
// from it, then its heaviest, the base dropped (indexPack).
func (ix *packIndexer) resolve(ctx context.Context, i int, content []byte) error {
	for {
		kids := ix.nodes[i].children
		if len(kids) == 0 {
			return nil
		}
		slices.SortStableFunc(kids, func(a, b int) int { return ix.nodes[a].weight - ix.nodes[b].weight })
		for _, k := range kids[:len(kids)-1] {
			made, err := ix.make(ctx, k, i, content)
			if err != nil {
				return err
			}
			if err := ix.resolve(ctx, k, made); err != nil {
				return err
			}
		}
		last := kids[len(kids)-1]
		made, err := ix.make(ctx, last, i, content)
		if err != nil {
			return err
		}
		i, content = last, made
	}
}

// make makes the delta k from base, the content of object i, writes it
// whole and returns its content.
func (ix *packIndexer) make(ctx context.Context, k, i int, base []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n := &ix.nodes[k]
	if _, err := ix.s.SeekObjectHeader(n.offset); err != nil {
		return nil, err
	}
	var d bytes.Buffer
	d.Grow(int(min(n.size, 1<<20)))
	written, _, err := ix.s.NextObject(&d)
	if err != nil {
		return nil, err
	}
	if written != n.size {
		return nil, fmt.Errorf("%w: a delta declaring %d bytes inflates to %d", packfile.ErrMalformedPackFile, n.size, written)
	}
	var made []byte
	if len(base) == 0 {
		// PatchDelta refuses an empty base; a delta on one only inserts.
		made, err = packfile.PatchDelta([]byte{0}, fixEmptyBase(d.Bytes()))
	} else {
		made, err = packfile.PatchDelta(base, d.Bytes())
	}
	if err != nil {
		return nil, fmt.Errorf("%w at %d: %w", errPackDelta, n.offset, err)
	}
	n.typ = ix.nodes[i].typ
	n.hash, n.done = plumbing.ComputeHash(n.typ, made), true
	off := ix.out.begin(n.typ, int64(len(made)))
	ix.out.Write(made)
	crc, err := ix.out.end()
	if err != nil {
		return nil, err
	}
	ix.idx.Add(n.hash, uint64(off), crc)
	ix.adopt(k)
	return made, nil
}

// fixEmptyBase rewrites the header of a delta on an empty base as one on
// a base of one byte, which it does not copy from (a copy from an empty
// base is out of range either way).
func fixEmptyBase(d []byte) []byte {
	if len(d) == 0 || d[0] != 0 {
		return d
	}
	return append([]byte{1}, d[1:]...)
}

// packOut writes a pack of whole objects: each one's header and zlib
// stream, its CRC-32 taken for the index, the whole's SHA-1 at its end.
type packOut struct {
	w   *bufio.Writer
	sum hash.Hash
	crc hash.Hash32
	off int64
	zw  *zlib.Writer
	err error
}

func newPackOut(w io.Writer) *packOut {
	p := &packOut{w: bufio.NewWriterSize(w, 64<<10), sum: sha1.New(), crc: crc32.NewIEEE()}
	p.zw, _ = zlib.NewWriterLevel(io.Discard, zlib.BestSpeed)
	return p
}

// raw writes b to the pack, counted in its checksum, the current
// object's CRC-32 and the offset.
func (p *packOut) raw(b []byte) {
	if p.err != nil {
		return
	}
	_, p.err = p.w.Write(b)
	p.sum.Write(b)
	p.crc.Write(b)
	p.off += int64(len(b))
}

type packRaw struct{ p *packOut }

func (r packRaw) Write(b []byte) (int, error) {
	r.p.raw(b)
	return len(b), r.p.err
}

// copy writes an object as r holds it, header and zlib stream,
// returning its offset and CRC-32.
func (p *packOut) copy(r io.Reader) (int64, uint32, error) {
	off := p.off
	p.crc.Reset()
	if _, err := io.Copy(packRaw{p}, r); err != nil {
		return 0, 0, err
	}
	return off, p.crc.Sum32(), p.err
}

func (p *packOut) header(count uint32) {
	p.raw([]byte{'P', 'A', 'C', 'K', 0, 0, 0, 2, byte(count >> 24), byte(count >> 16), byte(count >> 8), byte(count)})
}

// begin starts an object of type t and size bytes, returning its offset;
// its content is written to p, then end finishes it.
func (p *packOut) begin(t plumbing.ObjectType, size int64) int64 {
	off := p.off
	p.crc.Reset()
	h := []byte{byte(t)<<4 | byte(size&0x0f)}
	for s := uint64(size) >> 4; s != 0; s >>= 7 {
		h[len(h)-1] |= 0x80
		h = append(h, byte(s&0x7f))
	}
	p.raw(h)
	p.zw.Reset(packRaw{p})
	return off
}

func (p *packOut) Write(b []byte) (int, error) {
	if _, err := p.zw.Write(b); err != nil {
		return 0, err
	}
	return len(b), p.err
}

// end finishes the object begun, returning its CRC-32.
func (p *packOut) end() (uint32, error) {
	if err := p.zw.Close(); err != nil {
		return 0, err
	}
	return p.crc.Sum32(), p.err
}

// finish writes the pack's checksum and returns it.
func (p *packOut) finish() (plumbing.Hash, error) {
	var h plumbing.Hash
	copy(h[:], p.sum.Sum(nil))
	if p.err != nil {
		return h, p.err
	}
	if _, err := p.w.Write(h[:]); err != nil {
		return h, err
	}
	return h, p.w.Flush()
}
