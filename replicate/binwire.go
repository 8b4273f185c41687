package replicate

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/shoal-db/shoal/record"
	"github.com/shoal-db/shoal/record/bodycodec"
)

// The binary form of a Request and a Response, which nodes exchange on
// /internal/v3/replicate (JSON, on /internal/v1/replicate, costs the two
// ends several times the CPU: decoding it was 7% of a node's CPU under
// majority writes, docs/benchmarks.md). A request starts with
// BinaryVersion, a response with responseVersion; then, field by field
// in the order of the structs, unsigned integers as uvarints, signed
// ones as zig-zag varints, strings as a uvarint length
// and their bytes, booleans as bits of a flags byte, positions as epoch
// and seq, times as seconds and nanoseconds since 1970 (read back in
// UTC), lists as a uvarint count and their elements, and a document's
// body in the binary form of record/bodycodec.
//
// A reader refuses what no writer makes: another version, a count larger
// than what could follow it or (in a request) than a replica accepts
// (MaxRequestBatches, MaxRequestKeys, MaxChain), a flag bit it does not
// know, bytes after the end. It checks the form only; Validate checks the content.
//
// Version 3 of a request added a document's New flag (record.Doc.New).
// A node reads requests of version 2 too, which older masters send on
// /internal/v2/replicate and its stream; it sends version 3 on the v3
// paths only, which an older replica answers 404 (it is then sent JSON,
// as one older still). Responses did not change.
const BinaryVersion byte = 3

// olderVersion is the version of a request an older master sends: no
// document of it is New.
const olderVersion byte = 2

// responseVersion starts a response.
const responseVersion byte = 2

// ContentTypeBinary is the media type of the binary form.
const ContentTypeBinary = "application/vnd.shoal.replicate.v3"

// ErrMalformed marks bytes that are not a request or response in the
// binary form.
var ErrMalformed = errors.New("malformed binary replication message")

// Flags of a batch and of a document.
const (
	batchRestore = 1 << iota
	batchFull
	batchFlags = batchRestore | batchFull
)

const (
	docDeleted = 1 << iota
	docHasBody
	docNew
	docFlags = docDeleted | docHasBody | docNew
)

// AppendRequest encodes r after dst.
func AppendRequest(dst []byte, r Request) ([]byte, error) {
	dst = binary.AppendUvarint(append(dst, BinaryVersion), uint64(len(r.Batches)))
	for i := range r.Batches {
		b := &r.Batches[i]
		dst = binary.AppendUvarint(dst, uint64(b.Partition))
		dst = binary.AppendUvarint(dst, b.Epoch)
		dst = appendPosition(dst, b.EpochStart)
		dst = binary.AppendUvarint(dst, uint64(len(b.Epochs)))
		for _, e := range b.Epochs {
			dst = appendPosition(binary.AppendUvarint(dst, e.Epoch), e.Start)
		}
		dst = appendPosition(dst, b.From)
		dst = appendPosition(dst, b.UpTo)
		var flags byte
		if b.Restore {
			flags |= batchRestore
		}
		if b.Full {
			flags |= batchFull
		}
		dst = append(dst, flags)
		dst = binary.AppendUvarint(dst, uint64(len(b.Absent)))
		for _, k := range b.Absent {
			dst = bodycodec.AppendString(dst, k)
		}
		dst = bodycodec.AppendString(dst, b.KeyFrom)
		dst = bodycodec.AppendString(dst, b.KeyTo)
		dst = appendPosition(dst, b.Horizon)
		dst = appendPosition(dst, b.Committed)
		dst = binary.AppendUvarint(dst, uint64(len(b.Docs)))
		for j := range b.Docs {
			d := &b.Docs[j]
			dst = bodycodec.AppendString(dst, d.User)
			dst = bodycodec.AppendString(dst, d.Coll)
			dst = bodycodec.AppendString(dst, d.ID)
			dst = binary.AppendVarint(dst, d.Version)
			dst = appendPosition(dst, d.Pos)
			flags := byte(0)
			if d.Deleted {
				flags |= docDeleted
			}
			if d.Body != nil {
				flags |= docHasBody
			}
			if d.New {
				flags |= docNew
			}
			dst = append(dst, flags)
			dst = binary.AppendVarint(dst, d.Updated.Unix())
			dst = binary.AppendUvarint(dst, uint64(d.Updated.Nanosecond()))
			if d.Body != nil {
				var err error
				if dst, err = bodycodec.Append(dst, d.Body); err != nil {
					return nil, fmt.Errorf("batch %d, document %d: %w", i, j, err)
				}
			}
		}
	}
	return dst, nil
}

func appendPosition(dst []byte, p record.Position) []byte {
	return binary.AppendUvarint(binary.AppendUvarint(dst, p.Epoch), p.Seq)
}

// ReadRequest decodes a request encoded by AppendRequest, or by an older
// master (olderVersion).
func ReadRequest(b []byte) (Request, error) {
	r := reader{b: b}
	known := byte(docFlags)
	if r.version(BinaryVersion, olderVersion) == olderVersion {
		known &^= docNew
	}
	var req Request
	n := r.count(MaxRequestBatches)
	if n > 0 {
		req.Batches = make([]WireBatch, n)
	}
	keys := 0
	for i := range req.Batches {
		if r.err != nil {
			break
		}
		wb := &req.Batches[i]
		wb.Partition = r.int()
		wb.Epoch = r.uvarint()
		wb.EpochStart = r.position()
		if n := r.count(MaxChain); n > 0 {
			wb.Epochs = make([]record.EpochStart, n)
			for k := range wb.Epochs {
				wb.Epochs[k] = record.EpochStart{Epoch: r.uvarint(), Start: r.position()}
			}
		}
		wb.From = r.position()
		wb.UpTo = r.position()
		flags := r.flags(batchFlags)
		wb.Restore, wb.Full = flags&batchRestore != 0, flags&batchFull != 0
		if n := r.count(MaxRequestKeys - keys); n > 0 {
			keys += n
			wb.Absent = make([]string, n)
			for k := range wb.Absent {
				wb.Absent[k] = r.string()
			}
		}
		wb.KeyFrom = r.string()
		wb.KeyTo = r.string()
		wb.Horizon = r.position()
		wb.Committed = r.position()
		if n := r.count(MaxRequestKeys - keys); n > 0 {
			keys += n
			wb.Docs = make([]WireDoc, n)
			for k := range wb.Docs {
				r.doc(&wb.Docs[k], known)
			}
		}
	}
	if err := r.end(); err != nil {
		return Request{}, err
	}
	return req, nil
}

// AppendResponse encodes r after dst.
func AppendResponse(dst []byte, r Response) []byte {
	dst = binary.AppendUvarint(append(dst, responseVersion), uint64(len(r.Results)))
	for _, res := range r.Results {
		dst = binary.AppendUvarint(dst, uint64(res.Partition))
		dst = appendPosition(dst, res.Applied)
		dst = binary.AppendUvarint(dst, res.Epoch)
		dst = bodycodec.AppendString(dst, string(res.Code))
		dst = bodycodec.AppendString(dst, res.Error)
		dst = binary.AppendUvarint(dst, uint64(len(res.Diverged)))
		for _, k := range res.Diverged {
			dst = bodycodec.AppendString(dst, k)
		}
	}
	return dst
}

// ReadResponse decodes a response encoded by AppendResponse.
func ReadResponse(b []byte) (Response, error) {
	r := reader{b: b}
	r.version(responseVersion)
	var resp Response
	if n := r.count(MaxRequestBatches); n > 0 {
		resp.Results = make([]Result, n)
	}
	for i := range resp.Results {
		if r.err != nil {
			break
		}
		res := &resp.Results[i]
		res.Partition = r.int()
		res.Applied = r.position()
		res.Epoch = r.uvarint()
		res.Code = Code(r.string())
		res.Error = r.string()
		// A replica rolls back every change its master never had, however
		// many: the list is bounded by the answer's size alone.
		if n := r.count(len(r.b)); n > 0 {
			res.Diverged = make([]string, n)
			for k := range res.Diverged {
				res.Diverged[k] = r.string()
			}
		}
	}
	if err := r.end(); err != nil {
		return Response{}, err
	}
	return resp, nil
}

// reader reads the binary form; after its first error it reads zeros and
// keeps that error.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s (%d bytes before the end)", ErrMalformed, fmt.Sprintf(format, args...), len(r.b))
		r.b = nil
	}
}

// version reads the version byte, one of those given (the first is the
// current one), and returns it.
func (r *reader) version(versions ...byte) byte {
	if len(r.b) == 0 {
		r.fail("empty")
		return 0
	}
	v := r.b[0]
	if !slices.Contains(versions, v) {
		r.fail("version %d, this node reads %v", v, versions)
		return 0
	}
	r.b = r.b[1:]
	return v
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("a cut or overlong unsigned integer")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("a cut or overlong integer")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// int reads a partition number: an unsigned integer that fits an int.
func (r *reader) int() int {
	v := r.uvarint()
	if v > 1<<31-1 {
		r.fail("a partition number of %d", v)
		return 0
	}
	return int(v)
}

// count reads a list's length: at most max, and at most the bytes left
// (every element takes at least one).
func (r *reader) count(max int) int {
	v := r.uvarint()
	if r.err != nil {
		return 0
	}
	if v > uint64(max) || v > uint64(len(r.b)) {
		r.fail("a list of %d elements, more than %d or than could follow", v, max)
		return 0
	}
	return int(v)
}

func (r *reader) flags(known byte) byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.fail("cut before a flags byte")
		return 0
	}
	f := r.b[0]
	if f&^known != 0 {
		r.fail("unknown flags %#x", f&^known)
		return 0
	}
	r.b = r.b[1:]
	return f
}

func (r *reader) string() string {
	if r.err != nil {
		return ""
	}
	s, rest, err := bodycodec.DecodeString(r.b)
	if err != nil {
		r.fail("a cut string")
		return ""
	}
	r.b = rest
	return s
}

func (r *reader) position() record.Position {
	return record.Position{Epoch: r.uvarint(), Seq: r.uvarint()}
}

func (r *reader) doc(d *WireDoc, known byte) {
	d.User = r.string()
	d.Coll = r.string()
	d.ID = r.string()
	d.Version = r.varint()
	d.Pos = r.position()
	flags := r.flags(known)
	d.Deleted = flags&docDeleted != 0
	d.New = flags&docNew != 0
	sec, nsec := r.varint(), r.uvarint()
	if nsec >= uint64(time.Second) {
		r.fail("%d nanoseconds in a second", nsec)
	}
	d.Updated = time.Unix(sec, int64(nsec)).UTC()
	if flags&docHasBody != 0 && r.err == nil {
		body, rest, err := bodycodec.DecodePrefix(r.b)
		if err != nil {
			r.fail("a document's body: %v", err)
			return
		}
		d.Body, r.b = body, rest
	}
}

// end checks that the whole input was read.
func (r *reader) end() error {
	if r.err == nil && len(r.b) > 0 {
		r.fail("%d bytes after the end", len(r.b))
	}
	return r.err
}
